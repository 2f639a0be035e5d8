//! One module per subcommand.

pub mod probe;
pub mod topology;
