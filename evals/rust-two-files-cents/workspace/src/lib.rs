//! A point of sale's receipts.

pub mod cart;
pub mod money;
