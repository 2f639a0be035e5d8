//! One module per subcommand.

pub mod advise;
pub mod model;
pub mod bench;
pub mod probe;
pub mod topology;
pub mod tune;
pub mod wear;
