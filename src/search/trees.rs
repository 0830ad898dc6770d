//! NCCL's double binary tree over nodes (`src/graph/trees.cc`).
//!
//! Tree 0 is a binary tree on node indices built from the lowest set bit of
//! each index, rooted at 0 (whose single child is the largest power of two
//! below n). Tree 1 is the same tree mirrored (`x -> n-1-x`) when n is even,
//! or shifted by one (`x -> x+1 mod n`) when n is odd, so that the inner nodes
//! of one tree are leaves of the other.

/// One node's place in one tree: parent, two children (-1 = none), and which
/// child of its parent it is (0 = `down0`, 1 = `down1`; 0 for the root).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BtreeNode {
    pub(crate) up: i32,
    pub(crate) down0: i32,
    pub(crate) down1: i32,
    pub(crate) child_type: u8,
}

/// `ncclGetBtree(n, rank)`.
pub(crate) fn btree(n: i32, rank: i32) -> BtreeNode {
    // Lowest set bit of rank; for rank 0 the first power of two >= n.
    let mut bit = 1;
    while bit < n {
        if bit & rank != 0 {
            break;
        }
        bit <<= 1;
    }
    if rank == 0 {
        return BtreeNode {
            up: -1,
            down0: -1,
            // The root's only child is larger than it, so it is child 1.
            down1: if n > 1 { bit >> 1 } else { -1 },
            child_type: 0,
        };
    }
    let mut up = (rank ^ bit) | (bit << 1);
    if up >= n {
        up = rank ^ bit;
    }
    let child_type = if rank < up { 0 } else { 1 };
    let mut lowbit = bit >> 1;
    let down0 = if lowbit == 0 { -1 } else { rank - lowbit };
    let mut down1 = if lowbit == 0 { -1 } else { rank + lowbit };
    // NCCL's loop: the first pass recomputes the same value, then halves.
    while down1 >= n {
        down1 = if lowbit == 0 { -1 } else { rank + lowbit };
        lowbit >>= 1;
    }
    BtreeNode {
        up,
        down0,
        down1,
        child_type,
    }
}

/// `ncclGetDtree(n, rank)`: the node's place in tree 0 and in tree 1.
pub(crate) fn dtree(n: i32, rank: i32) -> [BtreeNode; 2] {
    let t0 = btree(n, rank);
    let t1 = if n % 2 == 1 {
        // Shift by one rank.
        let s = btree(n, (rank - 1 + n) % n);
        let map = |x: i32| if x == -1 { -1 } else { (x + 1) % n };
        BtreeNode {
            up: map(s.up),
            down0: map(s.down0),
            down1: map(s.down1),
            child_type: s.child_type,
        }
    } else {
        // Mirror.
        let m = btree(n, n - 1 - rank);
        let map = |x: i32| if x == -1 { -1 } else { n - 1 - x };
        BtreeNode {
            up: map(m.up),
            down0: map(m.down0),
            down1: map(m.down1),
            child_type: m.child_type,
        }
    };
    [t0, t1]
}

/// `log2i`: floor(log2 n) for n >= 1, 0 for n <= 1 (NCCL's tree depth estimate).
pub(crate) fn log2_floor(n: usize) -> usize {
    if n <= 1 {
        0
    } else {
        (usize::BITS - 1 - n.leading_zeros()) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn btree_of_14_matches_nccls_picture() {
        // trees.cc draws n=14: 0->8; 8->{4,12}; 4->{2,6}; 12->{10,13}; 2->{1,3}; 6->{5,7}; 10->{9,11}.
        let n = 14;
        let d = |r| {
            let b = btree(n, r);
            (b.down0, b.down1)
        };
        assert_eq!(d(0), (-1, 8));
        assert_eq!(d(8), (4, 12));
        assert_eq!(d(4), (2, 6));
        assert_eq!(d(12), (10, 13));
        assert_eq!(d(2), (1, 3));
        assert_eq!(d(10), (9, 11));
        assert_eq!(btree(n, 13).up, 12);
        assert_eq!(btree(n, 13).child_type, 1);
        assert_eq!(btree(n, 8).up, 0);
        for r in (1..n).step_by(2) {
            assert_eq!(d(r), (-1, -1), "odd rank {r} is a leaf");
        }
    }

    #[test]
    fn dtree_of_12_mirrors_and_13_shifts() {
        // n=12 (even): tree 1 is the mirror, as trees.cc draws it: 0->8 becomes 11->3.
        let t = dtree(12, 11)[1];
        assert_eq!((t.up, t.down0, t.down1), (-1, -1, 3));
        let t = dtree(12, 3)[1];
        // Rank 3 mirrors to 8; btree(12, 8): up 0, down0 8-4 = 4, down1 8+4 = 12 is out of
        // range so it halves to 8+2 = 10. Mapped back (x -> 11-x): up 11, down 7 and 1.
        assert_eq!(btree(12, 8).down0, 4);
        assert_eq!(btree(12, 8).down1, 10);
        assert_eq!((t.up, t.down0, t.down1), (11, 7, 1));
        // n=13 (odd): tree 1 is tree 0 shifted by one: root 1 with child 9.
        let t = dtree(13, 1)[1];
        assert_eq!((t.up, t.down0, t.down1), (-1, -1, 9));
        let t = dtree(13, 9)[1];
        assert_eq!((t.up, t.down0, t.down1), (1, 5, 0));
    }

    fn depth_of(tree: &[BtreeNode], r: usize) -> usize {
        let mut d = 0;
        let mut x = r as i32;
        while tree[x as usize].up != -1 {
            x = tree[x as usize].up;
            d += 1;
            assert!(d <= tree.len(), "cycle through rank {r}");
        }
        d
    }

    /// The construction rules, checked for every node count 1..64.
    #[test]
    fn dtree_rules_for_1_to_64_nodes() {
        for n in 1..=64i32 {
            let nodes: Vec<[BtreeNode; 2]> = (0..n).map(|r| dtree(n, r)).collect();
            for t in 0..2 {
                let tree: Vec<BtreeNode> = nodes.iter().map(|x| x[t]).collect();
                // Exactly one root: rank 0 for tree 0; n-1 (mirror) or 1 (shift) for tree 1.
                let roots: Vec<usize> = (0..n as usize).filter(|&r| tree[r].up == -1).collect();
                let expected_root = match (t, n % 2) {
                    (0, _) => 0,
                    _ if n == 1 => 0,
                    (_, 0) => n as usize - 1,
                    _ => 1,
                };
                assert_eq!(roots, vec![expected_root], "n={n} tree {t}");
                for r in 0..n as usize {
                    let me = tree[r];
                    // Parent/child symmetry, including which child slot.
                    if me.up != -1 {
                        let p = tree[me.up as usize];
                        let slot = if me.child_type == 0 { p.down0 } else { p.down1 };
                        assert_eq!(slot, r as i32, "n={n} tree {t} rank {r} parent {}", me.up);
                    }
                    for c in [me.down0, me.down1] {
                        if c != -1 {
                            assert!((0..n).contains(&c), "n={n} child {c} out of range");
                            assert_eq!(tree[c as usize].up, r as i32, "n={n} tree {t}");
                        }
                    }
                    // Everybody reaches the root (no cycles).
                    depth_of(&tree, r);
                }
                // Depth: the root has one child heading a binary tree, so the deepest rank is
                // ceil(log2 n) hops from the root (n=14: 0-8-4-2-1 = 4 = ceil(log2 14));
                // below the root's child that is floor(log2 n) levels for n not a power of two.
                let depth = (0..n as usize).map(|r| depth_of(&tree, r)).max().unwrap();
                let ceil_log2 = if n == 1 {
                    0
                } else {
                    log2_floor(n as usize - 1) + 1
                };
                assert_eq!(depth, ceil_log2, "n={n} tree {t}");
                // NCCL's own estimate (connect.cc) is floor(log2 n), never more than the real depth.
                assert!(log2_floor(n as usize) <= depth);
            }
            // Interior (has children) in both trees: nobody for even n; for odd n only rank 0,
            // the root of tree 0 that the shift turns into the inner node n-1 of tree 1.
            let both: Vec<i32> = (0..n)
                .filter(|&r| {
                    let [a, b] = nodes[r as usize];
                    (a.down0 != -1 || a.down1 != -1) && (b.down0 != -1 || b.down1 != -1)
                })
                .collect();
            if n % 2 == 0 || n == 1 {
                assert!(both.is_empty(), "n={n}: {both:?}");
            } else {
                assert_eq!(both, vec![0], "n={n}");
            }
        }
    }

    #[test]
    fn log2() {
        assert_eq!(log2_floor(1), 0);
        assert_eq!(log2_floor(2), 1);
        assert_eq!(log2_floor(3), 1);
        assert_eq!(log2_floor(128), 7);
    }
}
