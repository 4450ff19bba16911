// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright The Lance Authors

//! Miscellaneous utility functions that don't have a home elsewhere.

pub mod accumulation;
pub mod bytepack;
