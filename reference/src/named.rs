//! Closed sets of names: enums whose variants case files, reports, snapshots and the command line
//! spell by a fixed string. [`named_enum!`](crate::named_enum) declares such an enum with each
//! variant's name written once and derives the rest from it: `ALL`, `NAMES`, `name()`,
//! `parse()`, `Display`, the [`Named`] trait (for the command line's typed parsers) and serde
//! (de)serialization by the same names, so a name cannot drift between a table, a serde rename
//! and a parser.
//!
//! Serde reads and writes exactly the names (case files and reports stay strict); the optional
//! aliases (`F16 = "f16" | "fp16"`) are accepted by `parse` only, i.e. where a person types.

use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, Unexpected, VariantAccess};
use std::fmt;
use std::marker::PhantomData;

#[doc(hidden)]
pub use serde as __serde;

/// An enum declared by [`named_enum!`](crate::named_enum).
pub trait Named: Copy + Eq + fmt::Debug + 'static {
    /// Every variant, in declaration order.
    const ALL: &'static [Self];
    /// Every variant's name, in the order of `ALL`.
    const NAMES: &'static [&'static str];
    /// The enum's name (for serde's messages).
    const TYPE_NAME: &'static str;
    fn name(self) -> &'static str;
    /// Further spellings `parse` accepts.
    fn aliases(self) -> &'static [&'static str];
    /// The variant named `s` (or spelled by one of its aliases).
    fn parse(s: &str) -> Option<Self>;
}

/// Declares an enum whose variants are spelled by fixed names:
///
/// ```
/// w4a16_reference::named_enum! {
///     /// A doc comment.
///     #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
///     pub enum Fruit {
///         Apple = "apple",
///         /// Aliases follow `|`; `parse` takes them, serde and `name()` never do.
///         BloodOrange = "blood-orange" | "orange",
///     }
/// }
/// assert_eq!(Fruit::BloodOrange.name(), "blood-orange");
/// assert_eq!(Fruit::parse("orange"), Some(Fruit::BloodOrange));
/// assert_eq!(Fruit::ALL.len(), 2);
/// ```
///
/// The enum must derive at least `Clone, Copy, Debug, PartialEq, Eq`. A leading
/// `#[names_only]` leaves serde out, for an enum whose serde form is another naming rule (a
/// verdict's outcome is `expected-fail` in reports and `xfail` in snapshot rows).
#[macro_export]
macro_rules! named_enum {
    (@impl $Name:ident { $( $Variant:ident = $name:literal $(| $alias:literal)* ),+ }) => {
        impl $Name {
            /// Every variant, in declaration order.
            pub const ALL: [$Name; <[&str]>::len(&[$(stringify!($Variant)),+])] =
                [$($Name::$Variant),+];
            /// Every variant's name, in the order of `ALL`.
            pub const NAMES: [&'static str; <[&str]>::len(&[$(stringify!($Variant)),+])] =
                [$($name),+];

            /// The name case files, reports and the command line spell this variant by.
            pub const fn name(self) -> &'static str {
                match self {
                    $( $Name::$Variant => $name, )+
                }
            }

            /// Further spellings [`Self::parse`] accepts.
            pub fn aliases(self) -> &'static [&'static str] {
                match self {
                    $( $Name::$Variant => &[$($alias),*], )+
                }
            }

            /// The variant with this name (or alias).
            pub fn parse(s: &str) -> ::core::option::Option<$Name> {
                match s {
                    $( $name $(| $alias)* => ::core::option::Option::Some($Name::$Variant), )+
                    _ => ::core::option::Option::None,
                }
            }
        }

        impl ::core::fmt::Display for $Name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl $crate::named::Named for $Name {
            const ALL: &'static [$Name] = &$Name::ALL;
            const NAMES: &'static [&'static str] = &$Name::NAMES;
            const TYPE_NAME: &'static str = stringify!($Name);
            fn name(self) -> &'static str {
                $Name::name(self)
            }
            fn aliases(self) -> &'static [&'static str] {
                $Name::aliases(self)
            }
            fn parse(s: &str) -> ::core::option::Option<$Name> {
                $Name::parse(s)
            }
        }
    };
    (
        #[names_only]
        $(#[$meta:meta])*
        $vis:vis enum $Name:ident {
            $( $(#[$vmeta:meta])* $Variant:ident = $name:literal $(| $alias:literal)* ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $Name { $( $(#[$vmeta])* $Variant, )+ }
        $crate::named_enum!(@impl $Name { $( $Variant = $name $(| $alias)* ),+ });
    };
    (
        $(#[$meta:meta])*
        $vis:vis enum $Name:ident {
            $( $(#[$vmeta:meta])* $Variant:ident = $name:literal $(| $alias:literal)* ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $Name { $( $(#[$vmeta])* $Variant, )+ }
        $crate::named_enum!(@impl $Name { $( $Variant = $name $(| $alias)* ),+ });

        impl $crate::named::__serde::Serialize for $Name {
            fn serialize<S: $crate::named::__serde::Serializer>(
                &self,
                serializer: S,
            ) -> ::core::result::Result<S::Ok, S::Error> {
                serializer.serialize_unit_variant(stringify!($Name), *self as u32, self.name())
            }
        }

        impl<'de> $crate::named::__serde::Deserialize<'de> for $Name {
            fn deserialize<D: $crate::named::__serde::Deserializer<'de>>(
                deserializer: D,
            ) -> ::core::result::Result<Self, D::Error> {
                $crate::named::deserialize(deserializer)
            }
        }
    };
}

/// Serde's reading of a [`Named`] enum, as `#[derive(Deserialize)]` reads a unit-only enum (an
/// enum in the data model, its variant an identifier by name or index), so every format reads
/// what it read before and an unknown name gets serde's own message.
pub fn deserialize<'de, D: Deserializer<'de>, T: Named>(d: D) -> Result<T, D::Error> {
    d.deserialize_enum(T::TYPE_NAME, T::NAMES, EnumVisitor::<T>(PhantomData))
}

struct EnumVisitor<T>(PhantomData<T>);

impl<'de, T: Named> de::Visitor<'de> for EnumVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "enum {}", T::TYPE_NAME)
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<T, A::Error> {
        let (value, variant) = data.variant_seed(Identifier::<T>(PhantomData))?;
        variant.unit_variant()?;
        Ok(value)
    }
}

struct Identifier<T>(PhantomData<T>);

impl<'de, T: Named> DeserializeSeed<'de> for Identifier<T> {
    type Value = T;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        d.deserialize_identifier(self)
    }
}

impl<'de, T: Named> de::Visitor<'de> for Identifier<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("variant identifier")
    }

    fn visit_u64<E: de::Error>(self, i: u64) -> Result<T, E> {
        usize::try_from(i)
            .ok()
            .and_then(|i| T::ALL.get(i).copied())
            .ok_or_else(|| {
                let expected = format!("variant index 0 <= i < {}", T::ALL.len());
                E::invalid_value(Unexpected::Unsigned(i), &expected.as_str())
            })
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<T, E> {
        T::ALL
            .iter()
            .copied()
            .find(|v| v.name() == s)
            .ok_or_else(|| E::unknown_variant(s, T::NAMES))
    }

    fn visit_bytes<E: de::Error>(self, b: &[u8]) -> Result<T, E> {
        match std::str::from_utf8(b) {
            Ok(s) => self.visit_str(s),
            Err(_) => Err(E::unknown_variant(&String::from_utf8_lossy(b), T::NAMES)),
        }
    }
}

/// For tests of a [`Named`] enum: every name is unique, `parse` takes each name and alias back
/// to its variant, `Display` writes the name, and a different spelling (the name upper-cased)
/// is refused.
pub fn assert_names<T: Named + fmt::Display>() {
    assert_eq!(T::ALL.len(), T::NAMES.len(), "{}", T::TYPE_NAME);
    for (i, &v) in T::ALL.iter().enumerate() {
        let name = v.name();
        assert_eq!(T::NAMES[i], name, "{}::{v:?}", T::TYPE_NAME);
        assert_eq!(T::parse(name), Some(v), "{}: {name:?}", T::TYPE_NAME);
        assert_eq!(v.to_string(), name, "{}::{v:?}", T::TYPE_NAME);
        for alias in v.aliases() {
            assert_eq!(
                T::parse(alias),
                Some(v),
                "{}: alias {alias:?}",
                T::TYPE_NAME
            );
        }
        let upper = name.to_uppercase();
        if upper != name {
            assert_eq!(T::parse(&upper), None, "{}: {upper:?}", T::TYPE_NAME);
        }
    }
    let mut spellings: Vec<&str> = T::ALL
        .iter()
        .flat_map(|v| std::iter::once(v.name()).chain(v.aliases().iter().copied()))
        .collect();
    let count = spellings.len();
    spellings.sort_unstable();
    spellings.dedup();
    assert_eq!(spellings.len(), count, "{}: a spelling twice", T::TYPE_NAME);
}

/// [`assert_names`], and serde writes exactly the name (as a JSON string, through `to_json`) and
/// reads it back, while an alias is refused by serde (`from_json` returns `None`).
pub fn assert_serde_names<T: Named + fmt::Display>(
    to_json: impl Fn(T) -> String,
    from_json: impl Fn(&str) -> Option<T>,
) {
    assert_names::<T>();
    for &v in T::ALL {
        let json = format!("\"{}\"", v.name());
        assert_eq!(to_json(v), json, "{}::{v:?}", T::TYPE_NAME);
        assert_eq!(from_json(&json), Some(v), "{}: {json}", T::TYPE_NAME);
        for alias in v.aliases() {
            assert_eq!(
                from_json(&format!("\"{alias}\"")),
                None,
                "{}: {alias}",
                T::TYPE_NAME
            );
        }
    }
}

/// One `#[test]` per named enum: `named_enum_tests! { kernel_id: KernelId, ... }` checks each
/// with [`assert_serde_names`] through `serde_json` (which the calling crate must have);
/// `names_only { outcome: Outcome }` checks with [`assert_names`] alone.
#[macro_export]
macro_rules! named_enum_tests {
    ($( $test:ident : $T:ty ),* $(,)? $(; names_only { $( $ntest:ident : $N:ty ),* $(,)? })?) => {
        $(
            #[test]
            fn $test() {
                $crate::named::assert_serde_names::<$T>(
                    |v| ::serde_json::to_string(&v).expect("a name serializes"),
                    |s| ::serde_json::from_str(s).ok(),
                );
            }
        )*
        $($(
            #[test]
            fn $ntest() {
                $crate::named::assert_names::<$N>();
            }
        )*)?
    };
}

#[cfg(test)]
mod tests {
    use crate::data::DataClass;
    use crate::formats::{Producer, StoredDtype};
    use crate::layer::Symmetry;
    use crate::moe::{MapKind, RoutingKind};

    crate::named_enum_tests! {
        act_dtype: crate::ActDtype,
        data_class: DataClass,
        symmetry: Symmetry,
        producer: Producer,
        routing_kind: RoutingKind,
        map_kind: MapKind,
        stored_dtype: StoredDtype,
    }

    /// The names case files and reports have always used.
    #[test]
    fn names_are_the_ones_on_disk() {
        assert_eq!(crate::ActDtype::NAMES, ["f16", "bf16"]);
        assert_eq!(
            crate::ActDtype::parse("bfloat16"),
            Some(crate::ActDtype::Bf16)
        );
        assert_eq!(
            Producer::NAMES,
            [
                "compressed-tensors",
                "gptq-v1",
                "gptq-v2",
                "awq",
                "legacy-unpacked-zp"
            ]
        );
        assert_eq!(
            RoutingKind::NAMES,
            [
                "softmax",
                "empty-experts",
                "one-expert",
                "same-expert-twice"
            ]
        );
        assert_eq!(Symmetry::NAMES, ["sym", "asym"]);
    }

    /// An unknown name gets serde's own message, as the derive gave.
    #[test]
    fn unknown_names_get_serdes_message() {
        let e = serde_json::from_str::<MapKind>("\"some\"").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("unknown variant `some`, expected `all` or `every-other`"),
            "{e}"
        );
    }
}
