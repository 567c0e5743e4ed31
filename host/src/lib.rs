//! placeholder
pub mod dedicated;
