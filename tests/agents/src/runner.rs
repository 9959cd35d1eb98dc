//! What the test files share to declare and run their tests: [`agent_tests!`] turns
//! one line per test into a `#[test]`, and [`block_on`] runs a test's async body on
//! its own runtime, failing the test with the error's whole chain.

/// One `#[test]` per line, `name: args;`, each calling `$run(args, "name")`: the
/// test's own name is passed last, since a live test re-runs itself by name inside its
/// network namespace. Attributes written before a name (`#[ignore = "…"]`) are kept.
#[macro_export]
macro_rules! agent_tests {
    ($run:path; $($(#[$attr:meta])* $name:ident: $($arg:expr),+;)*) => {
        $(
            $(#[$attr])*
            #[test]
            fn $name() {
                $run($($arg,)+ stringify!($name));
            }
        )*
    };
}

/// Runs `check` on a new runtime; panics with `what` and the error when it fails.
pub fn block_on<T>(what: &str, check: impl std::future::Future<Output = anyhow::Result<T>>) -> T {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(check).unwrap_or_else(|e| panic!("{what}: {e:#}"))
}
