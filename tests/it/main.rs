//! The one integration-test binary (one link of the heavy dependencies).

mod bad_input;
mod common;
mod golden;
mod pyarrow;
mod roundtrip;
