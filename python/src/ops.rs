//! One image column's ops applied to one encoded image
//! (`shardset.ops.ImageOps`): exactly what the input pipeline does to the
//! sample at a position of an epoch, for looking at a transform's output
//! and for measuring the per-image work alone (the benches' limit rows).

use std::sync::Arc;

use pyo3::prelude::*;

use shardset::features::limits::DecodeLimits;
use shardset::pipeline::ops::{ImagePlan, Op, SampleRng};
use shardset::pipeline::{BufferPool, Element, Layout};

use crate::error::{OrPy, PyRes};
use crate::tensors::tensor;

/// A checked plan of ops for one image column, and the buffers of the
/// tensors it made (used again once torch frees them).
#[pyclass(module = "shardset._shardset", name = "ImageOps", frozen)]
pub(crate) struct PyImageOps {
    plan: ImagePlan,
    limits: DecodeLimits,
    pool: Arc<BufferPool>,
}

/// How many outputs' buffers an `ImageOps` keeps for the next calls.
const KEPT_OUTPUTS: usize = 2;

#[pymethods]
impl PyImageOps {
    #[new]
    #[pyo3(signature = (ops, column = "image"))]
    fn new(ops: &str, column: &str) -> PyRes<Self> {
        let ops = Op::list_from_json(column, ops).py()?;
        let plan = ImagePlan::new(column, &ops).py()?;
        let pool = Arc::new(BufferPool::new(KEPT_OUTPUTS * plan.out_bytes()));
        Ok(PyImageOps {
            plan,
            limits: DecodeLimits::default(),
            pool,
        })
    }

    /// Decodes `encoded`, draws the params of (seed, epoch, position) as
    /// the pipeline does for that sample, and returns the image as a torch
    /// tensor `[3, h, w]` ("CHW") or `[h, w, 3]` ("HWC"). The GIL is
    /// released meanwhile.
    #[pyo3(signature = (encoded, seed = 0, epoch = 0, position = 0, layout = "CHW"))]
    fn apply<'py>(
        &self,
        py: Python<'py>,
        encoded: &[u8],
        seed: u64,
        epoch: u64,
        position: u64,
        layout: &str,
    ) -> PyRes<Bound<'py, PyAny>> {
        let (place, shape) = self.plan.placement(layout.parse::<Layout>().py()?).py()?;
        let data = py
            .detach(|| {
                let mut out = self.pool.take(self.plan.out_bytes());
                let mut rng = SampleRng::new(seed, epoch, position);
                self.plan
                    .run_encoded(encoded, &self.limits, &mut rng, place, &mut out)
                    .map(|()| out)
            })
            .py()?;
        tensor(
            py,
            data,
            Element::from(self.plan.out_dtype()),
            &shape,
            &self.pool,
        )
    }
}
