//! TEMPORARY stub (lead): replaced by part R's module at merge.

/// How a case's tokens are routed.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum RoutingKind {
    #[serde(rename = "softmax")]
    Softmax,
    #[serde(rename = "empty-experts")]
    EmptyExperts,
    #[serde(rename = "one-expert")]
    AllOnOneExpert,
    #[serde(rename = "same-expert-twice")]
    SameExpertTwice,
}

impl RoutingKind {
    pub fn name(self) -> &'static str {
        match self {
            RoutingKind::Softmax => "softmax",
            RoutingKind::EmptyExperts => "empty-experts",
            RoutingKind::AllOnOneExpert => "one-expert",
            RoutingKind::SameExpertTwice => "same-expert-twice",
        }
    }
}

/// Which experts are local.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum MapKind {
    #[serde(rename = "all")]
    All,
    #[serde(rename = "every-other")]
    EveryOther,
}

impl MapKind {
    pub fn name(self) -> &'static str {
        match self {
            MapKind::All => "all",
            MapKind::EveryOther => "every-other",
        }
    }
}
