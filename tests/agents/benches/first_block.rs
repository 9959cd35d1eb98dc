//! Filled in below in this session.
fn main() {}
