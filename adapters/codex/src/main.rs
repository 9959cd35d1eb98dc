// Being written in this session; replaced by the adapter.
fn main() {}
