//! "Did you mean" over many names, from an index rather than a scan per
//! miss: 16,000 undefined edge targets among 16,000 nodes took 48 s when
//! every miss compared itself with every name.
//!
//! [`NameIndex`] answers exactly as [`crate::closest_name`] does (the
//! nearest name within a third of the longer length, ties to the first in
//! order), found in two steps. Every name one edit away from the query
//! (an insertion, a deletion, a substitution or a transposition) shares
//! with it the query itself or a variant with one character deleted, so a
//! hash map of those variants finds all of them at once; that is the
//! common typo, and nothing nearer exists. Only when nothing is one edit
//! away are the names of plausible length compared one by one, and that
//! scan has a budget per index ([`FARTHER_BUDGET`] comparisons): past it,
//! suggestions are those one edit away.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};

/// Comparisons an index may spend on suggestions more than one edit away.
pub const FARTHER_BUDGET: usize = 2_000_000;

/// Names indexed for "did you mean".
#[derive(Debug)]
pub struct NameIndex {
    names: Vec<String>,
    lower: Vec<String>,
    lengths: Vec<usize>,
    by_length: BTreeMap<usize, Vec<usize>>,
    variants: HashMap<String, Vec<usize>>,
    budget: Cell<usize>,
}

/// `text` and every string made by deleting one of its characters.
fn one_deletion_variants(text: &str) -> Vec<String> {
    let mut out = vec![text.to_string()];
    for (i, c) in text.char_indices() {
        let variant = format!("{}{}", &text[..i], &text[i + c.len_utf8()..]);
        if !out.contains(&variant) {
            out.push(variant);
        }
    }
    out
}

impl NameIndex {
    pub fn new<S: Into<String>>(names: impl IntoIterator<Item = S>) -> NameIndex {
        NameIndex::with_budget(names, FARTHER_BUDGET)
    }

    /// An index whose scans for farther names stop after `budget` comparisons.
    pub fn with_budget<S: Into<String>>(names: impl IntoIterator<Item = S>, budget: usize) -> NameIndex {
        let mut index = NameIndex {
            names: Vec::new(),
            lower: Vec::new(),
            lengths: Vec::new(),
            by_length: BTreeMap::new(),
            variants: HashMap::new(),
            budget: Cell::new(budget),
        };
        for name in names {
            let name: String = name.into();
            let length = name.chars().count();
            if length > crate::MAX_SUGGESTED_LENGTH {
                continue;
            }
            let id = index.names.len();
            let lower = name.to_lowercase();
            for variant in one_deletion_variants(&lower) {
                index.variants.entry(variant).or_default().push(id);
            }
            index.by_length.entry(length).or_default().push(id);
            index.names.push(name);
            index.lower.push(lower);
            index.lengths.push(length);
        }
        index
    }

    /// Compares indexed name `id` with the query, keeping the better.
    fn consider<'s>(&'s self, id: usize, name: &str, lower: &str, length: usize, best: &mut Option<(usize, &'s str)>) {
        let candidate = self.names[id].as_str();
        if candidate == name {
            return;
        }
        let Some(limit) = crate::suggestion_limit(length, self.lengths[id]) else { return };
        crate::keep_nearer(best, strsim::osa_distance(lower, &self.lower[id]), limit, candidate);
    }

    /// The indexed name closest to `name`, as [`crate::closest_name`] would choose.
    pub fn closest(&self, name: &str) -> Option<&str> {
        let length = name.chars().count();
        if length > crate::MAX_SUGGESTED_LENGTH {
            return None;
        }
        let lower = name.to_lowercase();
        let mut best: Option<(usize, &str)> = None;
        let mut near: Vec<usize> = one_deletion_variants(&lower).iter().filter_map(|v| self.variants.get(v)).flatten().copied().collect();
        near.sort_unstable();
        near.dedup();
        for id in near {
            self.consider(id, name, &lower, length, &mut best);
        }
        if best.is_some_and(|(distance, _)| distance <= 1) {
            return best.map(|(_, c)| c);
        }
        // Farther: the lengths within reach, while the budget lasts.
        let (low, high) = (length.saturating_sub(length / 2 + 1), length + length / 2 + 1);
        for ids in self.by_length.range(low..=high).map(|(_, ids)| ids) {
            for &id in ids {
                let left = self.budget.get();
                if left == 0 {
                    return best.map(|(_, c)| c);
                }
                self.budget.set(left - 1);
                self.consider(id, name, &lower, length, &mut best);
            }
        }
        best.map(|(_, c)| c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::closest_name;

    #[test]
    fn the_index_agrees_with_the_scan() {
        let names = ["researcher", "writer", "done", "Review", "review_2", "q1", "q12", "q123", "a", "abc", "bca", "long_name_here"];
        let index = NameIndex::new(names);
        for query in
            ["reseacher", "writter", "zzz", "dnoe", "review", "REVIEW", "q1234", "q13", "b", "acb", "long_nmae_here", "x", "abc", ""]
        {
            assert_eq!(index.closest(query), closest_name(query, names), "{query}");
        }
    }

    #[test]
    fn many_misses_among_many_names_stay_fast() {
        let names: Vec<String> = (0..16_000).map(|i| format!("q{i}")).collect();
        let index = NameIndex::with_budget(names.iter().cloned(), 50_000);
        // One edit away: found through the variants, with no scan.
        for i in 0..16_000 {
            assert_eq!(index.closest(&format!("q{i}x")), Some(format!("q{i}").as_str()));
        }
        assert_eq!(index.budget.get(), 50_000, "no scan was needed");
        // Nothing near: the scans stop when the budget is spent.
        for i in 0..16_000 {
            assert_eq!(index.closest(&format!("zz{i}zz")), None);
        }
        assert_eq!(index.budget.get(), 0);
    }
}
