//! The prices section: the user's list prices by model id prefix
//! (`prices`), over `pricing`'s built-in table.

use super::Source;
use super::layers::{Layers, pick};

/// What tokens cost.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PricingConfig {
    /// The user's prices by model id prefix, over the built-in ones.
    pub prices: std::collections::BTreeMap<String, crate::pricing::Price>,
}

impl Layers<'_> {
    pub(super) fn pricing(&mut self) -> PricingConfig {
        let l = self;
        PricingConfig { prices: pick!(l, "prices", prices, None, Default::default()) }
    }
}
