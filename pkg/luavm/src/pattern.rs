//! Lua 5.1 patterns (`string.find`, `string.match`, `string.gmatch`) in Rust, with a step
//! budget checked against the call's deadline.
//!
//! PUC Lua's C matcher backtracks without limit and cannot be interrupted by the instruction
//! hook: `string.find(("a"):rep(3e4), "a*a*a*a*b")` runs for hours inside one C call. This
//! matcher follows `lstrlib.c` 5.1 line by line (same classes, captures, `%b`, `%f`, anchors,
//! the pattern ending at its first `\0`, the same error messages) but counts every step and
//! gives up with the time-limit error once the deadline has passed, and bounds its recursion
//! (one level per quantifier or capture) at [`MAX_DEPTH`] ("pattern too complex", where Lua
//! 5.1 would overflow the C stack). Plain finds are linear.

use std::time::Instant;

/// Recursion bound of the matcher (Lua 5.1 has none and crashes on a C stack overflow).
pub(crate) const MAX_DEPTH: usize = 1000;
/// Lua 5.1's `LUA_MAXCAPTURES`.
const MAX_CAPTURES: usize = 32;
/// Steps between two looks at the clock.
const CHECK_EVERY: u64 = 4096;
const L_ESC: u8 = b'%';
const SPECIALS: &[u8] = b"^$*+?.([%-";

/// Why matching failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PatternError {
    /// A malformed pattern or a bad capture reference: Lua's message.
    Pattern(String),
    /// The deadline passed while matching.
    Deadline,
}

type Res<T> = Result<T, PatternError>;

fn perr<T>(message: &str) -> Res<T> {
    Err(PatternError::Pattern(message.to_owned()))
}

/// One capture's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Capture {
    /// The captured bytes.
    Text(Vec<u8>),
    /// A position capture `()`: 1-based.
    Position(i64),
}

#[derive(Clone, Copy)]
enum CapLen {
    Unfinished,
    Position,
    Len(usize),
}

struct MatchState<'a> {
    src: &'a [u8],
    pat: &'a [u8],
    level: usize,
    capture: [(usize, CapLen); MAX_CAPTURES],
    steps: u64,
    depth: usize,
    deadline: Option<Instant>,
}

/// The byte at `i`, `0` past the end (C strings are NUL-terminated).
fn at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0)
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn match_class(c: u8, cl: u8) -> bool {
    let res = match cl.to_ascii_lowercase() {
        b'a' => c.is_ascii_alphabetic(),
        b'c' => c.is_ascii_control(),
        b'd' => c.is_ascii_digit(),
        b'l' => c.is_ascii_lowercase(),
        b'p' => c.is_ascii_punctuation(),
        b's' => is_space(c),
        b'u' => c.is_ascii_uppercase(),
        b'w' => c.is_ascii_alphanumeric(),
        b'x' => c.is_ascii_hexdigit(),
        b'z' => c == 0,
        _ => return cl == c,
    };
    if cl.is_ascii_uppercase() { !res } else { res }
}

impl<'a> MatchState<'a> {
    fn new(src: &'a [u8], pat: &'a [u8], deadline: Option<Instant>) -> Self {
        Self {
            src,
            pat,
            level: 0,
            capture: [(0, CapLen::Unfinished); MAX_CAPTURES],
            steps: 0,
            depth: 0,
            deadline,
        }
    }

    fn p(&self, i: usize) -> u8 {
        at(self.pat, i)
    }

    fn step(&mut self) -> Res<()> {
        self.steps += 1;
        if self.steps.is_multiple_of(CHECK_EVERY)
            && self.deadline.is_some_and(|d| Instant::now() >= d)
        {
            return Err(PatternError::Deadline);
        }
        Ok(())
    }

    fn check_capture(&self, l: u8) -> Res<usize> {
        let l = i32::from(l) - i32::from(b'1');
        if l < 0
            || l as usize >= self.level
            || matches!(self.capture[l as usize].1, CapLen::Unfinished)
        {
            return perr("invalid capture index");
        }
        Ok(l as usize)
    }

    fn capture_to_close(&self) -> Res<usize> {
        (0..self.level)
            .rev()
            .find(|&l| matches!(self.capture[l].1, CapLen::Unfinished))
            .map_or_else(|| perr("invalid pattern capture"), Ok)
    }

    fn class_end(&self, mut p: usize) -> Res<usize> {
        let c = self.p(p);
        p += 1;
        if c == L_ESC {
            if self.p(p) == 0 {
                return perr("malformed pattern (ends with '%')");
            }
            return Ok(p + 1);
        }
        if c == b'[' {
            if self.p(p) == b'^' {
                p += 1;
            }
            loop {
                if self.p(p) == 0 {
                    return perr("malformed pattern (missing ']')");
                }
                let c = self.p(p);
                p += 1;
                if c == L_ESC && self.p(p) != 0 {
                    p += 1;
                }
                if self.p(p) == b']' {
                    break;
                }
            }
            return Ok(p + 1);
        }
        Ok(p)
    }

    /// `p` at `[`, `ec` at the closing `]`.
    fn match_bracket_class(&self, c: u8, mut p: usize, ec: usize) -> bool {
        let mut sig = true;
        if self.p(p + 1) == b'^' {
            sig = false;
            p += 1;
        }
        loop {
            p += 1;
            if p >= ec {
                break;
            }
            if self.p(p) == L_ESC {
                p += 1;
                if match_class(c, self.p(p)) {
                    return sig;
                }
            } else if self.p(p + 1) == b'-' && p + 2 < ec {
                p += 2;
                if self.p(p - 2) <= c && c <= self.p(p) {
                    return sig;
                }
            } else if self.p(p) == c {
                return sig;
            }
        }
        !sig
    }

    fn single_match(&self, c: u8, p: usize, ep: usize) -> bool {
        match self.p(p) {
            b'.' => true,
            L_ESC => match_class(c, self.p(p + 1)),
            b'[' => self.match_bracket_class(c, p, ep - 1),
            pc => pc == c,
        }
    }

    fn match_balance(&mut self, s: usize, p: usize) -> Res<Option<usize>> {
        if self.p(p) == 0 || self.p(p + 1) == 0 {
            return perr("unbalanced pattern");
        }
        if at(self.src, s) != self.p(p) {
            return Ok(None);
        }
        let (b, e) = (self.p(p), self.p(p + 1));
        let mut cont = 1usize;
        let mut s = s;
        loop {
            s += 1;
            if s >= self.src.len() {
                return Ok(None);
            }
            self.step()?;
            let c = self.src[s];
            if c == e {
                cont -= 1;
                if cont == 0 {
                    return Ok(Some(s + 1));
                }
            } else if c == b {
                cont += 1;
            }
        }
    }

    fn max_expand(&mut self, s: usize, p: usize, ep: usize) -> Res<Option<usize>> {
        let mut i = 0usize;
        while s + i < self.src.len() && self.single_match(self.src[s + i], p, ep) {
            self.step()?;
            i += 1;
        }
        loop {
            if let Some(res) = self.do_match(s + i, ep + 1)? {
                return Ok(Some(res));
            }
            if i == 0 {
                return Ok(None);
            }
            i -= 1;
        }
    }

    fn min_expand(&mut self, mut s: usize, p: usize, ep: usize) -> Res<Option<usize>> {
        loop {
            if let Some(res) = self.do_match(s, ep + 1)? {
                return Ok(Some(res));
            }
            if s < self.src.len() && self.single_match(self.src[s], p, ep) {
                s += 1;
            } else {
                return Ok(None);
            }
        }
    }

    fn start_capture(&mut self, s: usize, p: usize, what: CapLen) -> Res<Option<usize>> {
        if self.level >= MAX_CAPTURES {
            return perr("too many captures");
        }
        self.capture[self.level] = (s, what);
        self.level += 1;
        let res = self.do_match(s, p)?;
        if res.is_none() {
            self.level -= 1;
        }
        Ok(res)
    }

    fn end_capture(&mut self, s: usize, p: usize) -> Res<Option<usize>> {
        let l = self.capture_to_close()?;
        self.capture[l].1 = CapLen::Len(s - self.capture[l].0);
        let res = self.do_match(s, p)?;
        if res.is_none() {
            self.capture[l].1 = CapLen::Unfinished;
        }
        Ok(res)
    }

    fn match_capture(&self, s: usize, l: u8) -> Res<Option<usize>> {
        let l = self.check_capture(l)?;
        let (init, len) = self.capture[l];
        let CapLen::Len(len) = len else {
            // A position capture's length is negative in C: never matches.
            return Ok(None);
        };
        if self.src.len() - s >= len && self.src[init..init + len] == self.src[s..s + len] {
            Ok(Some(s + len))
        } else {
            Ok(None)
        }
    }

    /// Lua's `match`: the end of the match of `pat[p..]` at `src[s..]`, if any.
    fn do_match(&mut self, s: usize, p: usize) -> Res<Option<usize>> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            self.depth -= 1;
            return perr("pattern too complex");
        }
        let res = self.match_inner(s, p);
        self.depth -= 1;
        res
    }

    fn match_inner(&mut self, mut s: usize, mut p: usize) -> Res<Option<usize>> {
        loop {
            self.step()?;
            match self.p(p) {
                b'(' => {
                    return if self.p(p + 1) == b')' {
                        self.start_capture(s, p + 2, CapLen::Position)
                    } else {
                        self.start_capture(s, p + 1, CapLen::Unfinished)
                    };
                }
                b')' => return self.end_capture(s, p + 1),
                0 => return Ok(Some(s)),
                b'$' if self.p(p + 1) == 0 => {
                    return Ok((s == self.src.len()).then_some(s));
                }
                L_ESC if self.p(p + 1) == b'b' => match self.match_balance(s, p + 2)? {
                    Some(e) => {
                        s = e;
                        p += 4;
                        continue;
                    }
                    None => return Ok(None),
                },
                L_ESC if self.p(p + 1) == b'f' => {
                    p += 2;
                    if self.p(p) != b'[' {
                        return perr("missing '[' after '%f' in pattern");
                    }
                    let ep = self.class_end(p)?;
                    let previous = if s == 0 { 0 } else { self.src[s - 1] };
                    if self.match_bracket_class(previous, p, ep - 1)
                        || !self.match_bracket_class(at(self.src, s), p, ep - 1)
                    {
                        return Ok(None);
                    }
                    p = ep;
                    continue;
                }
                L_ESC if self.p(p + 1).is_ascii_digit() => {
                    match self.match_capture(s, self.p(p + 1))? {
                        Some(e) => {
                            s = e;
                            p += 2;
                            continue;
                        }
                        None => return Ok(None),
                    }
                }
                _ => {
                    let ep = self.class_end(p)?;
                    let m = s < self.src.len() && self.single_match(self.src[s], p, ep);
                    match self.p(ep) {
                        b'?' => {
                            if m && let Some(res) = self.do_match(s + 1, ep + 1)? {
                                return Ok(Some(res));
                            }
                            p = ep + 1;
                        }
                        b'*' => return self.max_expand(s, p, ep),
                        b'+' => {
                            return if m {
                                self.max_expand(s + 1, p, ep)
                            } else {
                                Ok(None)
                            };
                        }
                        b'-' => return self.min_expand(s, p, ep),
                        _ => {
                            if !m {
                                return Ok(None);
                            }
                            s += 1;
                            p = ep;
                        }
                    }
                }
            }
        }
    }

    fn one_capture(&self, i: usize, s: usize, e: usize) -> Res<Capture> {
        if i >= self.level {
            if i == 0 {
                return Ok(Capture::Text(self.src[s..e].to_vec()));
            }
            return perr("invalid capture index");
        }
        let (init, len) = self.capture[i];
        match len {
            CapLen::Unfinished => perr("unfinished capture"),
            CapLen::Position => Ok(Capture::Position(init as i64 + 1)),
            CapLen::Len(l) => Ok(Capture::Text(self.src[init..init + l].to_vec())),
        }
    }

    /// The captures of a match `s..e` (the whole match when the pattern has none and
    /// `whole` is set).
    fn captures(&self, s: usize, e: usize, whole: bool) -> Res<Vec<Capture>> {
        let n = if self.level == 0 && whole {
            1
        } else {
            self.level
        };
        (0..n).map(|i| self.one_capture(i, s, e)).collect()
    }
}

/// The pattern as Lua 5.1 sees it: up to its first NUL.
fn c_pattern(pat: &[u8]) -> &[u8] {
    pat.iter()
        .position(|&b| b == 0)
        .map_or(pat, |end| &pat[..end])
}

/// Lua's `posrelat` and the clamp of `str_find_aux`: a 0-based start within `0..=len`.
pub(crate) fn start_index(init: i64, len: usize) -> usize {
    let len_i = i64::try_from(len).unwrap_or(i64::MAX);
    let pos = if init < 0 {
        init.saturating_add(len_i).saturating_add(1)
    } else {
        init
    };
    let pos = if pos >= 0 { pos } else { 0 };
    let init = pos - 1;
    if init < 0 {
        0
    } else if init > len_i {
        len
    } else {
        init as usize
    }
}

/// What `string.find` / `string.match` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// No match.
    None,
    /// `find`: 1-based start and end, and the captures.
    Find(i64, i64, Vec<Capture>),
    /// `match`: the captures (or the whole match).
    Match(Vec<Capture>),
}

/// Plain substring search (linear; `lmemfind` is quadratic on hostile input).
fn plain_find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    memchr::memmem::find(haystack, needle)
}

/// `string.find(s, p, init, plain)` (`find`) or `string.match(s, p, init)`.
pub(crate) fn find(
    src: &[u8],
    pat: &[u8],
    init: i64,
    plain: bool,
    is_find: bool,
    deadline: Option<Instant>,
) -> Res<Found> {
    let init = start_index(init, src.len());
    let cpat = c_pattern(pat);
    if is_find && (plain || !cpat.iter().any(|c| SPECIALS.contains(c))) {
        return Ok(match plain_find(&src[init..], pat) {
            Some(i) => {
                let start = init + i;
                Found::Find(start as i64 + 1, (start + pat.len()) as i64, Vec::new())
            }
            None => Found::None,
        });
    }
    let (anchor, pat) = match cpat.first() {
        Some(b'^') => (true, &cpat[1..]),
        _ => (false, cpat),
    };
    let mut ms = MatchState::new(src, pat, deadline);
    let mut s1 = init;
    loop {
        ms.level = 0;
        if let Some(e) = ms.do_match(s1, 0)? {
            return Ok(if is_find {
                Found::Find(s1 as i64 + 1, e as i64, ms.captures(0, 0, false)?)
            } else {
                Found::Match(ms.captures(s1, e, true)?)
            });
        }
        ms.step()?;
        if s1 >= src.len() || anchor {
            return Ok(Found::None);
        }
        s1 += 1;
    }
}

/// One step of a `string.gmatch` iterator from byte `start`: the position to go on from and
/// the captures, or `None` when there is no further match.
pub(crate) fn gmatch_step(
    src: &[u8],
    pat: &[u8],
    start: usize,
    deadline: Option<Instant>,
) -> Res<Option<(usize, Vec<Capture>)>> {
    let pat = c_pattern(pat);
    let mut ms = MatchState::new(src, pat, deadline);
    let mut s = start;
    while s <= src.len() {
        ms.level = 0;
        if let Some(e) = ms.do_match(s, 0)? {
            let next = if e == s { e + 1 } else { e };
            return Ok(Some((next, ms.captures(s, e, true)?)));
        }
        ms.step()?;
        s += 1;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(s: &str, p: &str) -> Found {
        find(s.as_bytes(), p.as_bytes(), 1, false, false, None).unwrap()
    }

    fn text(s: &str) -> Capture {
        Capture::Text(s.as_bytes().to_vec())
    }

    #[test]
    fn basics() {
        assert_eq!(m("hello world", "o w"), Found::Match(vec![text("o w")]));
        assert_eq!(
            m("key = value", "(%w+)%s*=%s*(%w+)"),
            Found::Match(vec![text("key"), text("value")])
        );
        assert_eq!(
            m("abc", "()b()"),
            Found::Match(vec![Capture::Position(2), Capture::Position(3)])
        );
        assert_eq!(m("x(a(b)c)y", "%b()"), Found::Match(vec![text("(a(b)c)")]));
        assert_eq!(
            m("THE (quick) fox", "%f[%a]%a+"),
            Found::Match(vec![text("THE")])
        );
        assert_eq!(m("abc", "^b"), Found::None);
        assert_eq!(m("aaab", "a-b"), Found::Match(vec![text("aaab")]));
        assert_eq!(m("abab", "(ab)%1"), Found::Match(vec![text("ab")]));
        assert_eq!(
            find(b"a.b", b".", 1, true, true, None).unwrap(),
            Found::Find(2, 2, vec![])
        );
    }

    #[test]
    fn errors_name_the_cause() {
        for (p, msg) in [
            ("%", "malformed pattern (ends with '%')"),
            ("[a", "malformed pattern (missing ']')"),
            ("(a", "unfinished capture"),
            ("a)", "invalid pattern capture"),
            ("%1", "invalid capture index"),
            ("%b", "unbalanced pattern"),
            ("%fa", "missing '[' after '%f' in pattern"),
        ] {
            assert_eq!(
                find(b"abc", p.as_bytes(), 1, false, false, None),
                Err(PatternError::Pattern(msg.into())),
                "{p}"
            );
        }
    }

    #[test]
    fn backtracking_stops_at_the_deadline() {
        let src = vec![b'a'; 30_000];
        let started = Instant::now();
        let got = find(
            &src,
            b"a*a*a*a*a*b",
            1,
            false,
            true,
            Some(started + std::time::Duration::from_millis(100)),
        );
        assert_eq!(got, Err(PatternError::Deadline));
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }

    #[test]
    fn deep_patterns_are_refused_not_crashing() {
        let p = "a*".repeat(5000);
        assert_eq!(
            find(b"aaa", p.as_bytes(), 1, false, false, None),
            Err(PatternError::Pattern("pattern too complex".into()))
        );
    }
}
