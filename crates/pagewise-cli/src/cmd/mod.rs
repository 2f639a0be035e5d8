//! One module per subcommand.

pub mod advise;
pub mod bench;
pub mod db;
pub mod model;
pub mod probe;
pub mod serve;
pub mod stress;
pub mod topology;
pub mod tune;
pub mod wear;
