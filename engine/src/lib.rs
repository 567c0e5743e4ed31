//! placeholder

pub mod shooter;
