//! One definition of an enum's names: the spelling that `FromStr`,
//! `Display`, serde and the CLI's `clap::ValueEnum` all use, with the
//! aliases an older spelling keeps working under, and one error listing the
//! names. Before it, each enum carried a serde rename, a clap rename and a
//! hand-written parser, and they drifted (`shorter_side` in serde,
//! `shorter-side` in the CLI).

/// Defines a fieldless enum with one spelling per variant:
///
/// ```ignore
/// named_enum! {
///     /// Doc.
///     #[derive(Default)]
///     pub enum Mode("resize mode") {
///         /// Doc.
///         #[default]
///         Square = "square",
///         ShorterSide = "shorter_side" | "shorter-side",
///     }
/// }
/// ```
///
/// gives `Mode::NAMES`, `name()`, `Display`, `FromStr` (names and aliases,
/// exact; the error lists the names), serde as the name (aliases accepted),
/// and, with the `cli` feature, `clap::ValueEnum`.
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident ($what:literal) {
            $(
                $(#[$vmeta:meta])*
                $variant:ident = $text:literal $(| $alias:literal)*
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every value with its name, in the one spelling used everywhere.
            pub const NAMES: &'static [(&'static str, $name)] = &[ $( ($text, $name::$variant), )+ ];

            /// The value's name.
            pub fn name(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::error::Error;

            fn from_str(s: &str) -> $crate::error::Result<Self> {
                match s {
                    $( $text $(| $alias)* => Ok($name::$variant), )+
                    _ => {
                        let names: Vec<&str> = $name::NAMES.iter().map(|(n, _)| *n).collect();
                        Err($crate::error::Error::InvalidArgument(format!(
                            "{} must be one of {}, got '{s}'",
                            $what,
                            names.join(", ")
                        )))
                    }
                }
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }

        #[cfg(feature = "cli")]
        impl clap::ValueEnum for $name {
            fn value_variants<'a>() -> &'a [Self] {
                &[ $( $name::$variant, )+ ]
            }

            fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
                Some(match self {
                    $( $name::$variant => clap::builder::PossibleValue::new($text) $(.alias($alias))*, )+
                })
            }
        }
    };
}

pub(crate) use named_enum;

#[cfg(test)]
mod tests {
    named_enum! {
        /// A test enum.
        #[derive(Default)]
        pub enum Shade("shade") {
            /// Light.
            #[default]
            Light = "light",
            /// Dark, once spelled `dim`.
            Dark = "dark" | "dim",
        }
    }

    #[test]
    fn every_spelling_comes_from_the_one_definition() {
        assert_eq!(Shade::default(), Shade::Light);
        assert_eq!("dim".parse::<Shade>().unwrap(), Shade::Dark);
        assert_eq!(Shade::Dark.to_string(), "dark");
        let e = "grey".parse::<Shade>().unwrap_err().to_string();
        assert!(
            e.contains("shade must be one of light, dark, got 'grey'"),
            "{e}"
        );
        assert_eq!(serde_json::to_string(&Shade::Dark).unwrap(), "\"dark\"");
        assert_eq!(
            serde_json::from_str::<Shade>("\"dim\"").unwrap(),
            Shade::Dark
        );
        assert!(serde_json::from_str::<Shade>("\"grey\"").is_err());
        #[cfg(feature = "cli")]
        {
            use clap::ValueEnum;
            assert_eq!(Shade::from_str("dim", false).unwrap(), Shade::Dark);
            assert_eq!(Shade::value_variants().len(), 2);
        }
    }
}
