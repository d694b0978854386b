//! The arithmetic of `builtin/calculate`: a small recursive-descent parser over numbers,
//! `+ - * / % ^`, unary signs and parentheses, bounded in length and nesting before it
//! recurses.
//!
//! ```text
//! expr    := term (('+' | '-') term)*
//! term    := unary (('*' | '/' | '%') unary)*
//! unary   := ('-' | '+') unary | power
//! power   := primary ('^' unary)?          right-associative: 2^3^2 = 2^9
//! primary := number | '(' expr ')'
//! ```
//!
//! A sign binds looser than `^`, as in mathematics: `-2^2` is -4.

/// Longest expression read, in bytes.
pub const MAX_LEN: usize = 1_000;
/// Deepest nesting of parentheses and signs.
pub const MAX_DEPTH: usize = 64;

/// The value of `input`, or what is wrong with it (in words a model can act on).
pub fn evaluate(input: &str) -> Result<f64, String> {
    if input.len() > MAX_LEN {
        return Err(format!(
            "the expression is longer than {MAX_LEN} characters"
        ));
    }
    let mut parser = Parser {
        bytes: input.as_bytes(),
        pos: 0,
        depth: 0,
    };
    parser.skip_space();
    if parser.at_end() {
        return Err("the expression is empty".into());
    }
    let value = parser.expr()?;
    parser.skip_space();
    if !parser.at_end() {
        return Err(parser.unexpected());
    }
    if !value.is_finite() {
        return Err("the result is too large to represent".into());
    }
    Ok(value)
}

/// `value` as a person writes it: integers without a fraction, others in the shortest form
/// that reads back the same.
pub fn format(value: f64) -> String {
    if value == 0.0 {
        return "0".into(); // not "-0"
    }
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else {
        format!("{value}")
    }
}

struct Parser<'a> {
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn at_end(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.pos += 1;
        }
    }

    /// The next non-space byte, consumed when it is one of `ops`.
    fn eat(&mut self, ops: &[u8]) -> Option<u8> {
        self.skip_space();
        let b = self.peek().filter(|b| ops.contains(b))?;
        self.pos += 1;
        Some(b)
    }

    fn unexpected(&self) -> String {
        match std::str::from_utf8(&self.bytes[self.pos..])
            .ok()
            .and_then(|rest| rest.chars().next())
        {
            Some(c) => format!("unexpected `{c}` at position {}", self.pos + 1),
            None => "the expression ends too early".into(),
        }
    }

    fn descend(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!(
                "the expression is nested more than {MAX_DEPTH} levels deep"
            ));
        }
        Ok(())
    }

    fn expr(&mut self) -> Result<f64, String> {
        let mut value = self.term()?;
        while let Some(op) = self.eat(b"+-") {
            let rhs = self.term()?;
            value = if op == b'+' { value + rhs } else { value - rhs };
        }
        Ok(value)
    }

    fn term(&mut self) -> Result<f64, String> {
        let mut value = self.unary()?;
        while let Some(op) = self.eat(b"*/%") {
            let rhs = self.unary()?;
            value = match op {
                b'*' => value * rhs,
                _ if rhs == 0.0 => return Err("division by zero".into()),
                b'/' => value / rhs,
                _ => value % rhs,
            };
        }
        Ok(value)
    }

    fn unary(&mut self) -> Result<f64, String> {
        if let Some(sign) = self.eat(b"+-") {
            self.descend()?;
            let value = self.unary()?;
            self.depth -= 1;
            return Ok(if sign == b'-' { -value } else { value });
        }
        self.power()
    }

    fn power(&mut self) -> Result<f64, String> {
        let base = self.primary()?;
        if self.eat(b"^").is_none() {
            return Ok(base);
        }
        self.descend()?;
        let exponent = self.unary()?;
        self.depth -= 1;
        let value = base.powf(exponent);
        if value.is_nan() {
            return Err(format!(
                "{} ^ {} is not a real number",
                format(base),
                format(exponent)
            ));
        }
        Ok(value)
    }

    fn primary(&mut self) -> Result<f64, String> {
        self.skip_space();
        match self.peek() {
            Some(b'(') => {
                self.pos += 1;
                self.descend()?;
                let value = self.expr()?;
                self.depth -= 1;
                if self.eat(b")").is_none() {
                    return Err(match self.at_end() {
                        true => "a `(` is not closed".into(),
                        false => self.unexpected(),
                    });
                }
                Ok(value)
            }
            Some(b) if b.is_ascii_digit() || b == b'.' => self.number(),
            _ => Err(self.unexpected()),
        }
    }

    fn number(&mut self) -> Result<f64, String> {
        let start = self.pos;
        let digits = |p: &mut Self| {
            while p.peek().is_some_and(|b| b.is_ascii_digit()) {
                p.pos += 1;
            }
        };
        digits(self);
        if self.peek() == Some(b'.') {
            self.pos += 1;
            digits(self);
        }
        // An exponent only when digits follow, so `2e` reads as `2` then an error at `e`.
        if matches!(self.peek(), Some(b'e' | b'E')) {
            let mark = self.pos;
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if self.peek().is_some_and(|b| b.is_ascii_digit()) {
                digits(self);
            } else {
                self.pos = mark;
            }
        }
        let text = std::str::from_utf8(&self.bytes[start..self.pos]).unwrap_or_default();
        text.parse::<f64>()
            .map_err(|_| format!("`{text}` at position {} is not a number", start + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(s: &str) -> String {
        match evaluate(s) {
            Ok(v) => format(v),
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn precedence_and_associativity() {
        assert_eq!(eval("1 + 2 * 3"), "7");
        assert_eq!(eval("(1 + 2) * 3"), "9");
        assert_eq!(eval("10 - 4 - 3"), "3");
        assert_eq!(eval("100 / 10 / 5"), "2");
        assert_eq!(eval("2 ^ 3 ^ 2"), "512");
        assert_eq!(eval("-2 ^ 2"), "-4");
        assert_eq!(eval("(-2) ^ 2"), "4");
        assert_eq!(eval("2 ^ -1"), "0.5");
        assert_eq!(eval("7 % 4 + 1"), "4");
        assert_eq!(eval("--3"), "3");
        assert_eq!(eval("+3 - -3"), "6");
        assert_eq!(eval("1.5e3 + .5"), "1500.5");
        assert_eq!(eval("0.1 + 0.2"), "0.30000000000000004");
        assert_eq!(eval(" 2*(3+(4-1))/3 "), "4");
        assert_eq!(eval("-0"), "0");
    }

    #[test]
    fn errors_say_what_is_wrong() {
        assert_eq!(eval("1 / 0"), "error: division by zero");
        assert_eq!(eval("5 % (2 - 2)"), "error: division by zero");
        assert_eq!(eval(""), "error: the expression is empty");
        assert_eq!(eval("1 +"), "error: the expression ends too early");
        assert_eq!(eval("(1 + 2"), "error: a `(` is not closed");
        assert_eq!(eval("1 + 2)"), "error: unexpected `)` at position 6");
        assert_eq!(eval("2 x 3"), "error: unexpected `x` at position 3");
        assert_eq!(eval("1..2"), "error: unexpected `.` at position 3");
        assert_eq!(eval("."), "error: `.` at position 1 is not a number");
        assert_eq!(eval("2e"), "error: unexpected `e` at position 2");
        assert_eq!(eval("é"), "error: unexpected `é` at position 1");
        assert_eq!(
            eval("10 ^ 400"),
            "error: the result is too large to represent"
        );
        assert_eq!(eval("(-8) ^ 0.5"), "error: -8 ^ 0.5 is not a real number");
    }

    #[test]
    fn input_is_bounded_before_recursion() {
        let deep = format!(
            "{}1{}",
            "(".repeat(MAX_DEPTH + 1),
            ")".repeat(MAX_DEPTH + 1)
        );
        assert!(eval(&deep).contains("nested more than"));
        let ok = format!("{}1{}", "(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH));
        assert_eq!(eval(&ok), "1");
        assert!(eval(&"-".repeat(500)).contains("nested more than"));
        assert!(eval(&"1+".repeat(MAX_LEN)).contains("longer than"));
    }
}
