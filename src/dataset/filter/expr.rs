//! A filter's expression: SQL over a cache's scalar columns, parsed,
//! type-coerced and planned by Lance's own DataFusion planner
//! (`lance_datafusion::planner::Planner`), then evaluated as a DataFusion
//! physical expression on Arrow batches. No parser of our own, no new crate
//! compiled (both are in Lance's tree), and a filter means the same whether
//! Lance's scanner evaluates it (pushdown) or we do.

use std::sync::Arc;

use arrow_array::{Array, BooleanArray, RecordBatch};
use arrow_schema::{DataType, Schema, SchemaRef};
use datafusion_common::DFSchema;
use datafusion_expr::simplify::SimplifyContext;
use datafusion_optimizer::simplify_expressions::ExprSimplifier;
use datafusion_physical_expr::PhysicalExpr;
use lance_datafusion::planner::Planner;

use crate::error::{Error, Result};
use crate::features::{Feature, Features};

/// A checked, planned filter over the columns it reads.
#[derive(Debug, Clone)]
pub(crate) struct Predicate {
    sql: String,
    /// The columns the filter reads, in the cache's column order.
    columns: Vec<String>,
    /// Those columns' fields: the schema `physical` is bound to.
    schema: SchemaRef,
    physical: Arc<dyn PhysicalExpr>,
}

fn bad(sql: &str, why: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("filter `{sql}`: {why}"))
}

/// The columns a filter may read: `Value` and `ClassLabel` (its ids).
fn scalar_columns(features: &Features) -> Vec<String> {
    features
        .names()
        .into_iter()
        .filter(|n| {
            matches!(
                features.get(n),
                Some(Feature::Value(_) | Feature::ClassLabel(_))
            )
        })
        .collect()
}

impl Predicate {
    /// Parses and plans `sql` against a cache's features and Arrow schema.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the filter and the reason: empty,
    /// not SQL, an unknown column, a column that is not a scalar, or an
    /// expression that is not a predicate.
    pub(crate) fn compile(sql: &str, features: &Features, schema: &Schema) -> Result<Predicate> {
        let sql = sql.trim();
        if sql.is_empty() {
            return Err(Error::InvalidArgument(
                "the filter is empty: give a predicate such as `label = 3 AND score > 0.5`".into(),
            ));
        }
        let scalars = scalar_columns(features);
        let parsed = Planner::new(Arc::new(schema.clone()))
            .parse_filter(sql)
            .map_err(|e| {
                bad(
                    sql,
                    format!("{e} (the columns a filter can read: {scalars:?})"),
                )
            })?;
        let mut columns = Vec::new();
        for path in Planner::column_names_in_expr(&parsed) {
            let top = path.split('.').next().unwrap_or(&path).to_string();
            if !scalars.contains(&top) {
                let kind = match features.get(&top) {
                    Some(f) => format!("of type {}", f.class_name()),
                    None => "not a column".into(),
                };
                return Err(bad(
                    sql,
                    format!(
                        "`{top}` is {kind}; filters read scalar columns (Value, ClassLabel ids): {scalars:?}"
                    ),
                ));
            }
            if !columns.contains(&top) {
                columns.push(top);
            }
        }
        // Cache column order, so the projection is stable.
        columns.sort_by_key(|c| scalars.iter().position(|s| s == c));
        let fields: Vec<_> = columns
            .iter()
            .map(|c| {
                schema
                    .field_with_name(c)
                    .map(|f| Arc::new(f.clone()))
                    .map_err(|e| bad(sql, e))
            })
            .collect::<Result<_>>()?;
        let projected = Arc::new(Schema::new(fields));
        let planner = Planner::new(projected.clone());
        let parsed = planner.parse_filter(sql).map_err(|e| bad(sql, e))?;
        // Types coerced (a literal to its column's type), not simplified:
        // DataFusion's simplifier folds `NOT (x IN (1)) OR NOT (x IN (0))`
        // to true, which keeps a row whose x is NULL (SQL says NULL, not
        // kept); found by tests/it/views.rs.
        let df_schema =
            Arc::new(DFSchema::try_from(projected.as_ref().clone()).map_err(|e| bad(sql, e))?);
        let simplifier = ExprSimplifier::new(
            SimplifyContext::builder()
                .with_schema(df_schema.clone())
                .build(),
        );
        let coerced = simplifier
            .coerce(parsed, &df_schema)
            .map_err(|e| bad(sql, e))?;
        let physical = planner
            .create_physical_expr(&coerced)
            .map_err(|e| bad(sql, e))?;
        match physical.data_type(&projected).map_err(|e| bad(sql, e))? {
            DataType::Boolean | DataType::Null => {}
            other => {
                return Err(bad(
                    sql,
                    format!("it gives {other}, not true or false: compare it, e.g. `x > 0`"),
                ))
            }
        }
        Ok(Predicate {
            sql: sql.to_string(),
            columns,
            schema: projected,
            physical,
        })
    }

    /// The filter as given (trimmed).
    pub(crate) fn sql(&self) -> &str {
        &self.sql
    }

    /// The columns the filter reads.
    pub(crate) fn columns(&self) -> &[String] {
        &self.columns
    }

    /// Which rows of `batch` (holding at least the filter's columns) the
    /// filter keeps: true where the predicate is true; false where it is
    /// false or NULL (SQL's three-valued logic, as a `WHERE` clause).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when a column is missing or evaluation fails.
    pub(crate) fn keep(&self, batch: &RecordBatch) -> Result<BooleanArray> {
        let columns = self
            .columns
            .iter()
            .map(|c| {
                batch
                    .column_by_name(c)
                    .cloned()
                    .ok_or_else(|| bad(&self.sql, format!("the batch has no column `{c}`")))
            })
            .collect::<Result<Vec<_>>>()?;
        let input = if columns.is_empty() {
            let opts =
                arrow_array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
            RecordBatch::try_new_with_options(self.schema.clone(), columns, &opts)
        } else {
            RecordBatch::try_new(self.schema.clone(), columns)
        }
        .map_err(|e| bad(&self.sql, e))?;
        let out = self
            .physical
            .evaluate(&input)
            .and_then(|v| v.into_array(input.num_rows()))
            .map_err(|e| bad(&self.sql, e))?;
        if out.data_type() == &DataType::Null {
            return Ok(BooleanArray::from(vec![false; input.num_rows()]));
        }
        let b = out
            .as_any()
            .downcast_ref::<BooleanArray>()
            .ok_or_else(|| bad(&self.sql, "the predicate did not give booleans"))?;
        Ok(match b.nulls() {
            Some(_) => arrow_select::filter::prep_null_mask_filter(b),
            None => b.clone(),
        })
    }
}
