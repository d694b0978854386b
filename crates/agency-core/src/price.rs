//! What model calls cost. A price is in micro-dollars (millionths of a US dollar) per million
//! tokens, so a token costs a whole number of pico-dollars (10⁻¹² USD): sums are exact, with
//! no floating point anywhere between a price list and a turn's total.

use std::fmt;

/// Tokens a model call used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
}

impl Usage {
    pub fn total(self) -> u32 {
        self.prompt_tokens + self.completion_tokens
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, rhs: Self) {
        self.prompt_tokens += rhs.prompt_tokens;
        self.completion_tokens += rhs.completion_tokens;
    }
}

/// A model's price per million tokens, in micro-dollars: `2.50` dollars is `2_500_000`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Price {
    pub input: u64,
    pub output: u64,
}

/// The highest price accepted, in dollars per million tokens.
pub const MAX_DOLLARS_PER_MILLION: u64 = 10_000;

impl Price {
    /// What `usage` costs at this price.
    pub fn cost(&self, usage: Usage) -> Cost {
        let input = u64::from(usage.prompt_tokens).saturating_mul(self.input);
        let output = u64::from(usage.completion_tokens).saturating_mul(self.output);
        Cost(input.saturating_add(output))
    }
}

/// What each party's model calls cost, in the order the parties first called: `calls` are
/// each call's caller and usage, in order; `price` the price of a caller's model. A caller's
/// cost is `None` once one of its calls was of a model without a price. One sum for a turn's
/// live answer and for the turn read back from its stored replies, so the two agree.
pub fn costs_by_caller<A: Copy + PartialEq>(
    calls: impl IntoIterator<Item = (A, Usage)>,
    price: impl Fn(A) -> Option<Price>,
) -> Vec<(A, Option<Cost>)> {
    let mut costs: Vec<(A, Option<Cost>)> = Vec::new();
    for (caller, usage) in calls {
        let i = match costs.iter().position(|(a, _)| *a == caller) {
            Some(i) => i,
            None => {
                costs.push((caller, Some(Cost::default())));
                costs.len() - 1
            }
        };
        let spent = &mut costs[i].1;
        *spent = spent.zip(price(caller)).map(|(sum, p)| sum + p.cost(usage));
    }
    costs
}

/// An amount in pico-dollars (10⁻¹² USD).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cost(pub u64);

impl std::ops::Add for Cost {
    type Output = Cost;
    fn add(self, rhs: Cost) -> Cost {
        Cost(self.0.saturating_add(rhs.0))
    }
}

impl fmt::Display for Cost {
    /// Dollars, rounded to the nearest millionth: `$0.002500`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let micro = self.0 / 1_000_000 + u64::from(self.0 % 1_000_000 >= 500_000);
        write!(f, "${}.{:06}", micro / 1_000_000, micro % 1_000_000)
    }
}

/// Why a text is not an amount of dollars.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AmountError {
    #[error("`{0}` is not an amount of dollars such as 2.50")]
    NotAnAmount(String),
    #[error("`{0}` has more than six decimals")]
    TooPrecise(String),
    #[error("`{0}` is more than {1} dollars")]
    TooLarge(String, u64),
}

/// Dollars written as a decimal (`2.5`, `0.15`, `10`) in micro-dollars, exactly: at most six
/// decimals, not negative, at most [`MAX_DOLLARS_PER_MILLION`].
pub fn parse_dollars(text: &str) -> Result<u64, AmountError> {
    parse_micro(text, MAX_DOLLARS_PER_MILLION)
}

/// Dollars written as a decimal in micro-dollars, exactly: at most six decimals, not
/// negative, at most `max` dollars.
pub(crate) fn parse_micro(text: &str, max: u64) -> Result<u64, AmountError> {
    let t = text.trim();
    let wrong = || AmountError::NotAnAmount(t.to_string());
    let (whole, frac) = t.split_once('.').unwrap_or((t, ""));
    if whole.is_empty() && frac.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(wrong());
    }
    if frac.len() > 6 {
        return Err(AmountError::TooPrecise(t.to_string()));
    }
    let too_large = || AmountError::TooLarge(t.to_string(), max);
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| too_large())?
    };
    if whole > max {
        return Err(too_large());
    }
    let frac: u64 = format!("{frac:0<6}").parse().map_err(|_| wrong())?;
    let micro = whole * 1_000_000 + frac;
    if micro > max * 1_000_000 {
        return Err(too_large());
    }
    Ok(micro)
}

/// Micro-dollars as the shortest decimal that reads back the same: `2500000` → `2.5`.
pub fn format_dollars(micro: u64) -> String {
    let (whole, frac) = (micro / 1_000_000, micro % 1_000_000);
    if frac == 0 {
        whole.to_string()
    } else {
        format!("{whole}.{}", format!("{frac:06}").trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_costs_its_tokens_at_the_price_exactly() {
        let gpt = Price {
            input: parse_dollars("2.50").unwrap(),
            output: parse_dollars("10").unwrap(),
        };
        let usage = Usage {
            prompt_tokens: 1000,
            completion_tokens: 200,
        };
        // 1000 × $2.50/M + 200 × $10/M = $0.0025 + $0.002.
        assert_eq!(gpt.cost(usage), Cost(4_500_000_000));
        assert_eq!(gpt.cost(usage).to_string(), "$0.004500");
        // Ten thousand tiny calls sum without drift.
        let cheap = Price {
            input: parse_dollars("0.15").unwrap(),
            output: 0,
        };
        let one = Usage {
            prompt_tokens: 7,
            completion_tokens: 0,
        };
        let total = (0..10_000).fold(Cost::default(), |sum, _| sum + cheap.cost(one));
        assert_eq!(total, Cost(10_500_000_000), "7 × 0.15 × 10⁴ µ$");
        assert_eq!(total.to_string(), "$0.010500");
        assert_eq!(Cost(499_999).to_string(), "$0.000000");
        assert_eq!(Cost(500_000).to_string(), "$0.000001");
    }

    #[test]
    fn costs_are_summed_per_caller_in_the_order_they_first_called() {
        let usage = |prompt_tokens, completion_tokens| Usage {
            prompt_tokens,
            completion_tokens,
        };
        let price = |who: &str| match who {
            "boss" => Some(Price {
                input: 2_500_000,
                output: 10_000_000,
            }),
            "helper" => Some(Price {
                input: 1_000_000,
                output: 0,
            }),
            _ => None,
        };
        let calls = [
            ("helper", usage(100, 5)),
            ("boss", usage(1000, 200)),
            ("free", usage(1, 1)),
            ("helper", usage(900, 5)),
        ];
        assert_eq!(
            costs_by_caller(calls, price),
            [
                ("helper", Some(Cost(1_000_000_000))),
                ("boss", Some(Cost(4_500_000_000))),
                ("free", None),
            ]
        );
        assert_eq!(costs_by_caller(Vec::<(&str, Usage)>::new(), price), []);
    }

    #[test]
    fn dollars_are_read_and_written_exactly() {
        for (text, micro) in [
            ("2.50", 2_500_000),
            ("0.15", 150_000),
            ("10", 10_000_000),
            (".5", 500_000),
            ("0.000001", 1),
        ] {
            assert_eq!(parse_dollars(text), Ok(micro), "{text}");
        }
        assert_eq!(format_dollars(2_500_000), "2.5");
        assert_eq!(format_dollars(10_000_000), "10");
        assert_eq!(format_dollars(150_000), "0.15");
        for bad in ["-1", "1e-3", "abc", "", ".", "0.0000001", "10001"] {
            assert!(parse_dollars(bad).is_err(), "{bad}");
        }
    }
}
