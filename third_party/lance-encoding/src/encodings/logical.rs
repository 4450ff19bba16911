// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright The Lance Authors

pub mod blob;
pub mod fixed_size_list;
pub mod list;
pub mod map;
pub mod primitive;
pub mod r#struct;
