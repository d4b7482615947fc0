//! The timestamp pin for boards that have none.

use core::convert::Infallible;

use embedded_hal::digital::{ErrorType, OutputPin};

/// A timestamp pin that drives nothing: for boards with no pin wired to an
/// energy monitor or a logic analyser. Its calls compile to nothing, so the
/// timed region is the same as without a pin.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoPin;

impl ErrorType for NoPin {
    type Error = Infallible;
}

impl OutputPin for NoPin {
    fn set_low(&mut self) -> Result<(), Infallible> {
        Ok(())
    }

    fn set_high(&mut self) -> Result<(), Infallible> {
        Ok(())
    }
}
