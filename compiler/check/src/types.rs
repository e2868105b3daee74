//! The types of Flow artifacts, and how they relate.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A structural type. Named types are resolved when lowered, so a `Ty`
/// never refers to a declaration, except through [`Ty::Named`] for the
/// recursive case (a record that contains itself).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Ty {
    Any,
    Null,
    Bool,
    Int,
    Float,
    String,
    Duration,
    Money,
    Percent,
    List {
        item: Box<Ty>,
    },
    Record {
        fields: IndexMap<String, FieldTy>,
    },
    Enum {
        values: Vec<String>,
    },
    Nullable {
        inner: Box<Ty>,
    },
    /// A declared type, by name: used for types that refer to themselves.
    Named {
        name: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FieldTy {
    pub ty: Ty,
    pub optional: bool,
}

/// The primitive type names, in the order the reference lists them.
pub const PRIMITIVES: &[&str] = &["string", "int", "float", "number", "bool", "duration", "money", "percent", "any", "null"];

pub fn primitive(name: &str) -> Option<Ty> {
    Some(match name {
        "string" => Ty::String,
        "int" => Ty::Int,
        "float" | "number" => Ty::Float,
        "bool" => Ty::Bool,
        "duration" => Ty::Duration,
        "money" => Ty::Money,
        "percent" => Ty::Percent,
        "any" => Ty::Any,
        "null" => Ty::Null,
        _ => return None,
    })
}

impl Ty {
    pub fn list(item: Ty) -> Ty {
        Ty::List { item: Box::new(item) }
    }

    pub fn nullable(inner: Ty) -> Ty {
        match inner {
            Ty::Nullable { .. } | Ty::Any | Ty::Null => inner,
            other => Ty::Nullable { inner: Box::new(other) },
        }
    }

    pub fn is_numeric(&self) -> bool {
        matches!(self, Ty::Int | Ty::Float)
    }

    /// The type with one level of nullability removed.
    pub fn non_null(&self) -> &Ty {
        match self {
            Ty::Nullable { inner } => inner,
            other => other,
        }
    }

    /// Whether values of these two types can be compared with `<`, `+`:
    /// numbers with numbers, durations with durations, and so on.
    pub fn same_quantity(&self, other: &Ty) -> bool {
        let (a, b) = (self.non_null(), other.non_null());
        matches!(a, Ty::Any)
            || matches!(b, Ty::Any)
            || (a.is_numeric() && b.is_numeric())
            || matches!((a, b), (Ty::Duration, Ty::Duration) | (Ty::Money, Ty::Money) | (Ty::Percent, Ty::Percent))
    }
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::Any => write!(f, "any"),
            Ty::Null => write!(f, "null"),
            Ty::Bool => write!(f, "bool"),
            Ty::Int => write!(f, "int"),
            Ty::Float => write!(f, "float"),
            Ty::String => write!(f, "string"),
            Ty::Duration => write!(f, "duration"),
            Ty::Money => write!(f, "money"),
            Ty::Percent => write!(f, "percent"),
            Ty::List { item } => write!(f, "[{item}]"),
            Ty::Record { fields } => {
                write!(f, "{{ ")?;
                for (i, (name, field)) in fields.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    if i == 4 {
                        return write!(f, "… }}");
                    }
                    write!(f, "{name}{}: {}", if field.optional { "?" } else { "" }, field.ty)?;
                }
                write!(f, " }}")
            }
            Ty::Enum { values } => {
                let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
                write!(f, "{}", quoted.join(" | "))
            }
            Ty::Nullable { inner } => write!(f, "{inner}?"),
            Ty::Named { name } => write!(f, "{name}"),
        }
    }
}
