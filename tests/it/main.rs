//! The one integration-test binary (one link of the heavy dependencies).

mod common;
mod golden;
