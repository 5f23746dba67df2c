//! Durations written as strings in the attribute, parsed by `humantime` (`"5s"`, `"250ms"`,
//! `"1m30s"`, `"1m 30s"`, `"2h"`, `"1.5s"`, `"5 seconds"`), in whole milliseconds.
//!
//! `humantime` is the parser `clap`, `tracing-subscriber` and most of the field use for
//! such strings, so the attribute accepts what users write elsewhere.

const HINT: &str = "write a duration like \"5s\", \"250ms\", \"2m\", \"1h\" or \"1m30s\"";

/// Milliseconds in `text`, or a message saying what is wrong with it.
pub(crate) fn parse_millis(text: &str) -> Result<u64, String> {
    if text.trim().is_empty() {
        return Err(format!("empty duration; {HINT}"));
    }
    let duration = humantime::parse_duration(text)
        .map_err(|error| format!("`{text}` is not a duration ({error}); {HINT}"))?;
    if duration.subsec_nanos() % 1_000_000 != 0 {
        return Err(format!(
            "`{text}` is not a whole number of milliseconds; lock durations are counted in ms"
        ));
    }
    u64::try_from(duration.as_millis()).map_err(|_| format!("`{text}` is too large"))
}

#[cfg(test)]
mod tests {
    use super::parse_millis;

    #[test]
    fn parses_units_and_sums() {
        assert_eq!(parse_millis("5s"), Ok(5_000));
        assert_eq!(parse_millis("250ms"), Ok(250));
        assert_eq!(parse_millis("2m"), Ok(120_000));
        assert_eq!(parse_millis("1h"), Ok(3_600_000));
        assert_eq!(parse_millis("1m30s"), Ok(90_000));
        assert_eq!(parse_millis("1m 30s"), Ok(90_000));
        assert_eq!(parse_millis("5 seconds"), Ok(5_000));
        assert_eq!(parse_millis("1.5s"), Ok(1_500));
        assert_eq!(parse_millis("0s"), Ok(0));
    }

    #[test]
    fn refuses_what_is_not_a_duration() {
        for bad in [
            "",
            " ",
            "5",
            "s",
            "5x",
            "-1s",
            "1.5ms",
            "500us",
            "99999999999999999999h",
        ] {
            assert!(parse_millis(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
