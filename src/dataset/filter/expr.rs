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
use datafusion_expr::utils::{conjunction, split_conjunction};
use datafusion_expr::{Expr, Operator};
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
    /// The conjuncts Lance's scanner may evaluate (see [`pushable`]).
    pushdown: Option<Expr>,
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
        let pushdown = conjunction(
            split_conjunction(&coerced)
                .into_iter()
                .filter(|e| pushable(e))
                .cloned(),
        );
        Ok(Predicate {
            sql: sql.to_string(),
            columns,
            schema: projected,
            physical,
            pushdown,
        })
    }

    /// The filter as given (trimmed).
    pub(crate) fn sql(&self) -> &str {
        &self.sql
    }

    /// The part of the filter Lance's scanner evaluates (so a scalar index
    /// on its column answers it): the top-level `AND` terms that compare a
    /// column with literals. Every row the filter keeps satisfies them, so
    /// the scan gives a superset, which [`keep`](Self::keep) then narrows:
    /// the rows are always the ones this module's evaluation keeps.
    pub(crate) fn pushdown(&self) -> Option<&Expr> {
        self.pushdown.as_ref()
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

/// A column, possibly cast (a literal coerced to the column's type leaves
/// the column bare; a column widened to the literal's is cast).
fn is_column(e: &Expr) -> bool {
    match e {
        Expr::Column(_) => true,
        Expr::Cast(c) => matches!(*c.expr, Expr::Column(_)),
        Expr::TryCast(c) => matches!(*c.expr, Expr::Column(_)),
        _ => false,
    }
}

fn is_literal(e: &Expr) -> bool {
    matches!(e, Expr::Literal(..))
}

/// An `AND` term whose meaning no rewriting can change, NULLs included:
/// a column compared with a literal (`=`, `<>`, `<`, `<=`, `>`, `>=`),
/// `IN` or `BETWEEN` literals (not negated), `IS [NOT] NULL`. Terms under
/// `NOT` or `OR` stay ours: Lance's planner simplifies them in ways that
/// break SQL's NULL logic.
fn pushable(e: &Expr) -> bool {
    match e {
        Expr::BinaryExpr(b) => {
            matches!(
                b.op,
                Operator::Eq
                    | Operator::NotEq
                    | Operator::Lt
                    | Operator::LtEq
                    | Operator::Gt
                    | Operator::GtEq
            ) && ((is_column(&b.left) && is_literal(&b.right))
                || (is_literal(&b.left) && is_column(&b.right)))
        }
        Expr::InList(l) => !l.negated && is_column(&l.expr) && l.list.iter().all(is_literal),
        Expr::Between(b) => {
            !b.negated && is_column(&b.expr) && is_literal(&b.low) && is_literal(&b.high)
        }
        Expr::IsNull(c) | Expr::IsNotNull(c) => is_column(c),
        _ => false,
    }
}
