//! Balanced trees for chains of associative operators.
//!
//! `a and b and c and …` is flat in the grammar. Built left-deep, a chain of
//! n operands is a tree n levels tall, and every pass that walks it
//! recursively needs n stack frames; built balanced it is ⌈log₂ n⌉ levels
//! above its tallest operand. The operators built this way (`and`, `or`,
//! `|`, and a formula's `and` and `or`) are associative, and evaluation
//! still goes left to right, so the shape changes nothing a program means.

/// Joins `operands` (each with its height) into a balanced tree with
/// `join`, returning the tree and its height. The operands stay in order;
/// the left half takes the extra operand of an odd split.
///
/// # Panics
/// Never for a non-empty list; the parser always passes at least one.
pub(crate) fn balanced<T>(operands: Vec<(T, u32)>, join: &mut impl FnMut(T, T) -> T) -> (T, u32) {
    let mut layer = operands;
    // Pairwise, layer by layer: iterative, and each layer halves the list.
    // Pairing neighbours from the left keeps a run of n operands at
    // ⌈log₂ n⌉ levels; an odd one out moves up unchanged.
    while layer.len() > 1 {
        let mut next = Vec::with_capacity(layer.len().div_ceil(2));
        let mut items = layer.into_iter();
        while let Some((lhs, lhs_height)) = items.next() {
            match items.next() {
                Some((rhs, rhs_height)) => next.push((join(lhs, rhs), lhs_height.max(rhs_height) + 1)),
                None => next.push((lhs, lhs_height)),
            }
        }
        layer = next;
    }
    layer.pop().expect("a chain has at least one operand")
}

#[cfg(test)]
mod tests {
    use super::balanced;

    fn shape(n: usize) -> (String, u32) {
        let operands = (0..n).map(|i| (i.to_string(), 1)).collect();
        balanced(operands, &mut |a, b| format!("({a} {b})"))
    }

    #[test]
    fn a_chain_keeps_its_order_and_grows_logarithmically() {
        assert_eq!(shape(1), ("0".to_string(), 1));
        assert_eq!(shape(2), ("(0 1)".to_string(), 2));
        assert_eq!(shape(3), ("((0 1) 2)".to_string(), 3));
        assert_eq!(shape(4), ("((0 1) (2 3))".to_string(), 3));
        assert_eq!(shape(5).1, 4);
        assert_eq!(shape(1_000_000).1, 21);
        let (text, _) = shape(7);
        let order: String = text.chars().filter(char::is_ascii_digit).collect();
        assert_eq!(order, "0123456");
    }
}
