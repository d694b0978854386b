//! Identifiers. Uuids are made by the service layer (v7, time-ordered); storage stores what it
//! is given. Agent ids are the small numbers agents use to address each other.

use std::fmt;
use std::str::FromStr;

use uuid::Uuid;

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub Uuid);

        impl $name {
            /// A new time-ordered id.
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map(Self)
            }
        }
    };
}

uuid_id!(
    /// An agency.
    AgencyId
);
uuid_id!(
    /// A conversation with an agency.
    ConversationId
);
uuid_id!(
    /// One message in one context of a conversation.
    MessageId
);
uuid_id!(
    /// One turn: a user message and everything the agency did to answer it.
    TurnId
);
uuid_id!(
    /// A roundtable room.
    RoomId
);
uuid_id!(
    /// An agent taking part in a room.
    ParticipantId
);
uuid_id!(
    /// A message in a room.
    RoomMessageId
);
uuid_id!(
    /// A tool call waiting for (or given) a person's approval.
    ApprovalId
);
uuid_id!(
    /// A reusable role or personality that room agents point to.
    DefinitionId
);
uuid_id!(
    /// A person with an account. Written as text, it is the owner of what they made.
    UserId
);

/// The number an agent is known by inside its agency (`#143`). `0` is reserved for the user.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AgentId(u32);

impl AgentId {
    /// The id agents use to address the end user.
    pub const USER: u32 = 0;
    /// The lowest agent id.
    pub const FIRST: AgentId = AgentId(1);

    /// An agent id; `None` for 0, which means the user.
    pub fn new(id: u32) -> Option<Self> {
        (id != Self::USER).then_some(Self(id))
    }

    /// The first free number at or above `from`, never 0.
    pub fn first_free(from: u32, taken: impl Fn(u32) -> bool) -> Self {
        let mut n = from.max(1);
        while taken(n) {
            n = n.saturating_add(1);
        }
        Self(n)
    }

    pub fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Display for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}
