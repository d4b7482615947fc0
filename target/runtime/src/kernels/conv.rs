//! CONV_2D (placeholder).
use super::{InvokeContext, KernelError, PrepareContext, Registration};
/// The CONV_2D kernel.
pub const REGISTRATION: Registration = Registration {
    name: "CONV_2D",
    prepare,
    invoke,
};
fn prepare(_ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    Err(KernelError::Internal)
}
fn invoke(_ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    Err(KernelError::Internal)
}
