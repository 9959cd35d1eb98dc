//! `terminull-kilo`: the Kilo adapter executable (see the library crate).

use std::process::ExitCode;

use terminull_adapter_sdk::serve;
use terminull_kilo::KiloAdapter;

fn main() -> ExitCode {
    serve::<KiloAdapter>()
}
