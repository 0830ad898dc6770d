//! NCCL's symmetric-kernel model (`model::symmetric`): hand calculations of
//! `queryModel` following `src/sym_kernels.cc` step by step, the picks NCCL
//! made on the 2x H200 (issue 13's table), eligibility rules, and the
//! `[Symmetric]` log line.

use planner::model::symmetric::{
    symmetric_candidates, PeerPath, RedOp, Registration, SymCandidate, SymDtype, SymReason,
    SymmetricChoice, SymmetricInput, SymmetricTable,
};
use planner::model::Coll;
use planner::nccl_log::symmetric_line as parse_symmetric_log_line;
use planner::Error;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

/// NCCL's "GBps": `(1<<30)/1.e6` bytes per µs (`sym_kernels.cc:181`).
const GBPS: f64 = 1073.741824;

/// `model()` of `sym_kernels.cc:105-108` written out, µs.
fn nccl_time(bus_bytes: f64, base_lat: f64, blocks: f64, sm_bw: f64, mul: f64, peak: f64) -> f64 {
    let (sm_bw, peak) = (sm_bw * GBPS, peak * GBPS);
    // softmin(x = blocks*smBw*busMultiplier, ceiling = peakBw, softness = smBw)
    let x = blocks * sm_bw * mul;
    let bw = peak - sm_bw * (((peak / sm_bw).exp() - 1.0) * (-x / sm_bw).exp()).ln_1p();
    // softplus(busBytes/bw - 1, softness 1): linear once the argument reaches 100
    let z = bus_bytes / bw - 1.0;
    let soft = if z >= 100.0 { z } else { z.exp().ln_1p() };
    base_lat + soft
}

/// The block rule (`sym_kernels.cc:192-202`): `blocks` is within 2.5 % of the
/// time at `max_blocks` and one block fewer is not.
fn assert_fewest_blocks(blocks: u32, max_blocks: u32, time: impl Fn(f64) -> f64) {
    let limit = 1.025 * (time(max_blocks as f64) as f32) as f64;
    assert!(
        time(blocks as f64) <= limit,
        "{blocks} blocks not within 2.5%"
    );
    if blocks > 1 && blocks < max_blocks {
        assert!(
            time((blocks - 1) as f64) > limit,
            "{} blocks would do",
            blocks - 1
        );
    }
}

fn table(family: &str) -> SymmetricTable {
    SymmetricTable::builtin(family).expect("built-in table")
}

fn run(input: &SymmetricInput, family: &str) -> SymmetricChoice {
    symmetric_candidates(input, &table(family)).expect("valid input")
}

fn row<'a>(choice: &'a SymmetricChoice, kernel: &str) -> &'a SymCandidate {
    choice
        .candidates
        .iter()
        .find(|c| c.kernel == kernel)
        .unwrap_or_else(|| panic!("no candidate {kernel}"))
}

fn assert_close(got: f32, want: f64, what: &str) {
    assert!(
        crate::common::close(got as f64, want, 2e-6),
        "{what}: model {got}, hand {want}"
    );
}

/// 2x H200 as measured: 2 ranks, sm90, NVLink through an NVSwitch, NVLS off.
fn h200x2(bytes: u64) -> SymmetricInput {
    SymmetricInput::new(Coll::AllReduce, bytes, 2, 90)
}

// ------------------------------------------------------------ hand calculations, 2.28

#[test]
fn hand_2_28_allreduce_agxll_8_bytes_on_2_ranks() {
    // 8 B = 2 floats; the count is aligned up to a 1024-byte cell (256 floats): nBytes = 1024.
    // AGxLL_R: busBytes = nRanks*nBytes*9 = 2*1024*9 = 18432. sm90 (cudaArch 900 < 1000):
    // LL -> baseLat 4.5, AllReduce -> smBw 65 GBps, peakBw 320 GBps, busMultiplier 1.
    let time = |b: f64| nccl_time(18432.0, 4.5, b, 65.0, 1.0, 320.0);
    // 64 blocks: bw ~ peak 343597.4 B/us, 18432/bw - 1 = -0.946, softplus 0.328 -> 4.828 us.
    // 1 block: bw = 343597.4 - 69793.2*ln(1 + 136.42*e^-1) = 68926 B/us, 18432/bw - 1 = -0.733,
    // softplus 0.3925 -> 4.8925 us <= 1.025*4.828: NCCL takes 1 block.
    assert!((time(64.0) - 4.827974).abs() < 1e-5);
    assert!((time(1.0) - 4.892492).abs() < 1e-5);
    assert_fewest_blocks(1, 64, time);
    let choice = run(&h200x2(8), "2.28");
    assert_eq!(choice.model_bytes, 1024);
    let c = row(&choice, "AllReduce_AGxLL_R");
    assert_eq!(c.bus_bytes, Some(18432));
    assert_eq!(c.blocks, Some(1));
    assert_eq!(c.channels, Some(1));
    assert_close(c.time_us.unwrap(), time(1.0), "time");
    // score = time * (1 + 0.025*1)
    assert_close(c.score_us.unwrap(), time(1.0) * 1.025, "score");
    // nccl-tests busbw for 8 B all-reduce on 2 ranks: 8 B / 4.8925 us x 2(n-1)/n = 0.001635 GB/s
    assert!((c.busbw_gbs.unwrap() - 8.0 / 4892.492).abs() < 1e-8);
}

#[test]
fn hand_2_28_allreduce_rsxld_agxst_2_mib_on_2_ranks() {
    // nBytes = 2 MiB (already whole cells). RSxLD_AGxST: busBytes = 2*nBytes*(n-1)/n = 2 MiB.
    // Not LL, AllReduce -> baseLat 7.8, smBw 65, peak 320.
    let time = |b: f64| nccl_time(2097152.0, 7.8, b, 65.0, 1.0, 320.0);
    // 64 blocks: 2097152/343597.4 - 1 = 5.1035, softplus 5.1096 -> 12.9096 us; tolerance
    // 1.025 x 12.9096 = 13.2323 us; 6 blocks give 13.2915 us (over), 7 blocks 13.0577 us (under).
    assert!((time(64.0) - 12.909573).abs() < 1e-5);
    assert!((time(7.0) - 13.057651).abs() < 1e-5);
    assert_fewest_blocks(7, 64, time);
    let choice = run(&h200x2(2 * MIB), "2.28");
    let c = row(&choice, "AllReduce_RSxLD_AGxST");
    assert_eq!(c.bus_bytes, Some(2 * MIB));
    assert_eq!(c.blocks, Some(7));
    // 2048 cells over 7 blocks: 293 cells each, 7 channels used.
    assert_eq!(c.channels, Some(7));
    assert_close(c.time_us.unwrap(), time(7.0), "time");
    assert_close(c.score_us.unwrap(), time(7.0) * 1.175, "score");
}

#[test]
fn hand_2_28_allgather_st_1_mib_per_rank_on_8_ranks() {
    // AllGather counts one rank's share: 1 MiB. ST: busBytes = (n-1)*nBytes = 7 MiB.
    // Not LL, not AllReduce -> baseLat 7.8, smBw 44, peak 320.
    let time = |b: f64| nccl_time(7.0 * 1048576.0, 7.8, b, 44.0, 1.0, 320.0);
    assert!((time(64.0) - 28.162304).abs() < 1e-4);
    assert!((time(9.0) - 28.653652).abs() < 1e-4);
    assert_fewest_blocks(9, 64, time);
    let mut input = SymmetricInput::new(Coll::AllGather, MIB, 8, 90);
    input.nvls_multicast = true; // 8 ranks: the multicast kernels become eligible too
    let choice = run(&input, "2.28");
    let c = row(&choice, "AllGather_ST");
    assert_eq!(c.bus_bytes, Some(7 * MIB));
    assert_eq!(c.blocks, Some(9));
    assert_close(c.time_us.unwrap(), time(9.0), "time");
    // nccl-tests: size = 8 MiB, busbw = size/time x 7/8
    let busbw = 8.0 * 1048576.0 / (time(9.0) * 1e3) * 7.0 / 8.0;
    assert!((c.busbw_gbs.unwrap() - busbw).abs() / busbw < 1e-6);
    let stmc = row(&choice, "AllGather_STMC");
    assert!(stmc.needs_multicast && stmc.eligible);
}

#[test]
fn hand_2_28_allreduce_multicast_64_mib_on_8_ranks() {
    // RSxLDMC_AGxSTMC: busBytes = nBytes/n + nBytes = 8 MiB + 64 MiB, busMultiplier = nRanks = 8,
    // peak 480 (its own), smBw 65, baseLat 7.8; blocks at most divUp(16, 8) = 2.
    let bus = (64 * MIB / 8 + 64 * MIB) as f64;
    let time = |b: f64| nccl_time(bus, 7.8, b, 65.0, 8.0, 480.0);
    assert!((time(2.0) - 153.287964).abs() < 1e-3);
    assert_fewest_blocks(2, 2, time); // 1 block is 2x slower
    assert!(time(1.0) > 1.025 * time(2.0));
    let mut input = SymmetricInput::new(Coll::AllReduce, 64 * MIB, 8, 90);
    input.nvls_multicast = true;
    let choice = run(&input, "2.28");
    let c = row(&choice, "AllReduce_RSxLDMC_AGxSTMC");
    assert!(c.needs_multicast && c.eligible);
    assert_eq!(c.bus_bytes, Some(72 * MIB));
    assert_eq!(c.blocks, Some(2));
    assert_close(c.time_us.unwrap(), time(2.0), "time");
}

// ------------------------------------------------------------ hand calculations, 2.30

#[test]
fn hand_2_30_allreduce_agxll_64_kib_on_4_ranks_sm100() {
    // sm100 (cudaArch 1000): LL, not AllGather -> baseLat 11; smBw 55; peak 600.
    // busBytes = 4 * 65536 * 9 = 2359296.
    let time = |b: f64| nccl_time(2359296.0, 11.0, b, 55.0, 1.0, 600.0);
    assert!((time(64.0) - 13.729582).abs() < 1e-4);
    assert!((time(11.0) - 13.947543).abs() < 1e-4);
    assert_fewest_blocks(11, 64, time);
    let choice = run(
        &SymmetricInput::new(Coll::AllReduce, 64 * KIB, 4, 100),
        "2.30",
    );
    let c = row(&choice, "AllReduce_AGxLL_R");
    assert_eq!(c.bus_bytes, Some(2359296));
    assert_eq!(c.blocks, Some(11));
    assert_close(c.time_us.unwrap(), time(11.0), "time");
}

#[test]
fn hand_2_30_reducescatter_ld_1_mib_on_8_ranks_sm100() {
    // ReduceScatter counts one rank's output: 1 MiB. LD: busBytes = 7 MiB; sm100 non-LL,
    // not AllReduce -> baseLat 13.0; smBw 55; peak 600.
    let time = |b: f64| nccl_time(7.0 * 1048576.0, 13.0, b, 55.0, 1.0, 600.0);
    assert!((time(12.0) - 23.703962).abs() < 1e-4);
    assert_fewest_blocks(12, 64, time);
    let mut input = SymmetricInput::new(Coll::ReduceScatter, MIB, 8, 100);
    input.dtype = SymDtype::Bf16;
    let choice = run(&input, "2.30");
    let c = row(&choice, "ReduceScatter_LD");
    assert_eq!(c.bus_bytes, Some(7 * MIB));
    assert_eq!(c.blocks, Some(12));
    assert_close(c.time_us.unwrap(), time(12.0), "time");
    assert_eq!(choice.pick.as_deref(), Some("ReduceScatter_LD"));
}

#[test]
fn hand_2_30_allgather_ll_4_kib_on_2_ranks_sm90() {
    // LL AllGather on sm90: baseLat 4.5, smBw 44 (not AllReduce), peak 320;
    // busBytes = 2 * 4096 * 9 = 73728.
    let time = |b: f64| nccl_time(73728.0, 4.5, b, 44.0, 1.0, 320.0);
    assert!((time(3.0) - 4.982623).abs() < 1e-5);
    assert_fewest_blocks(3, 64, time);
    let choice = run(
        &SymmetricInput::new(Coll::AllGather, 4 * KIB, 2, 90),
        "2.30",
    );
    let c = row(&choice, "AllGather_LL");
    assert_eq!(c.bus_bytes, Some(73728));
    assert_eq!(c.blocks, Some(3));
    // 4 cells over 3 blocks: 2 cells each, so only 2 CTAs get work.
    assert_eq!(c.channels, Some(2));
    assert_close(c.time_us.unwrap(), time(3.0), "time");
    assert_eq!(choice.pick.as_deref(), Some("AllGather_LL"));
}

#[test]
fn hand_2_30_allgather_stmc_16_mib_on_8_ranks_sm100() {
    // STMC: busBytes = (n-1)*nBytes = 112 MiB, busMultiplier 0.55*8 = 4.4, baseLat 13.0, smBw 55,
    // peak 600, blocks at most divUp(32, 8) = 4; 3 blocks are within 2.5 %.
    let time = |b: f64| nccl_time(7.0 * 16.0 * 1048576.0, 13.0, b, 55.0, 0.55 * 8.0, 600.0);
    assert!((time(3.0) - 195.916458).abs() < 1e-3);
    assert_fewest_blocks(3, 4, time);
    let mut input = SymmetricInput::new(Coll::AllGather, 16 * MIB, 8, 100);
    input.nvls_multicast = true;
    let choice = run(&input, "2.30");
    let c = row(&choice, "AllGather_STMC");
    assert!(c.needs_multicast && c.eligible);
    assert_eq!(c.blocks, Some(3));
    assert_close(c.time_us.unwrap(), time(3.0), "time");
}

// ------------------------------------------------------------ 2x H200 picks (issue 13)

#[test]
fn h200x2_picks_match_the_measured_kernels() {
    for family in ["2.28", "2.30"] {
        // Measured with nccl-tests -R 2 (NCCL 2.28.3): AllReduce_AGxLL_R at 8 B - 16 KiB ...
        let mut size = 8;
        while size <= 16 * KIB {
            let choice = run(&h200x2(size), family);
            assert!(choice.classic_path.is_empty(), "{family} {size}");
            assert_eq!(
                choice.runs_symmetric().map(|c| c.kernel.as_str()),
                Some("AllReduce_AGxLL_R"),
                "{family} {size} B"
            );
            size *= 2;
        }
        // ... and AllReduce_RSxLD_AGxST at 2 MiB.
        let choice = run(&h200x2(2 * MIB), family);
        assert_eq!(
            choice.pick.as_deref(),
            Some("AllReduce_RSxLD_AGxST"),
            "{family}"
        );
    }
}

#[test]
fn h200x2_picks_at_the_other_measured_sizes() {
    // What the source implies where the table has no kernel name: LL up to 64 KiB
    // (score 8.34 us vs 8.68 us), the two-shot from 128 KiB (8.96 vs 12.38 us).
    let expect = [
        (64 * KIB, "AllReduce_AGxLL_R"),
        (128 * KIB, "AllReduce_RSxLD_AGxST"),
        (4 * MIB, "AllReduce_RSxLD_AGxST"),
        (8 * MIB, "AllReduce_RSxLD_AGxST"),
        (16 * MIB, "AllReduce_RSxLD_AGxST"),
        (GIB, "AllReduce_RSxLD_AGxST"),
    ];
    for (size, kernel) in expect {
        let choice = run(&h200x2(size), "2.28");
        assert_eq!(choice.pick.as_deref(), Some(kernel), "{size} B");
    }
    // At 64 KiB both scores lie close together.
    let c64 = run(&h200x2(64 * KIB), "2.28");
    let ll = row(&c64, "AllReduce_AGxLL_R").score_us.unwrap();
    let two_shot = row(&c64, "AllReduce_RSxLD_AGxST").score_us.unwrap();
    assert!(ll < two_shot && two_shot < 1.05 * ll, "{ll} vs {two_shot}");
    // 1 GiB: the model saturates the 320 GBps peak with a handful of blocks, so NCCL launches
    // only 7 CTAs and predicts 3208 us (measured 4166 us, NCCL's default path 3255 us).
    let big = run(&h200x2(GIB), "2.28");
    let c = big.picked().unwrap();
    assert_eq!((c.blocks, c.channels), (Some(7), Some(7)));
    assert!(
        (c.time_us.unwrap() - 3208.04).abs() < 0.1,
        "{:?}",
        c.time_us
    );
}

#[test]
fn h200x2_multicast_kernels_are_shown_but_never_eligible() {
    for family in ["2.28", "2.30"] {
        for nvls in [false, true] {
            // NVLS on or off: with 2 ranks NCCL has no multicast (2.28: nvls.cc needs > 2 GPUs,
            // 2.30: hasLsaMultimem needs an LSA team of > 2).
            let mut input = h200x2(MIB);
            input.nvls_multicast = nvls;
            let choice = run(&input, family);
            let mc: Vec<&SymCandidate> = choice
                .candidates
                .iter()
                .filter(|c| c.needs_multicast)
                .collect();
            assert_eq!(mc.len(), 2, "{family}");
            for c in mc {
                assert!(!c.eligible);
                assert_eq!(c.ineligible, vec![SymReason::NeedsMulticast]);
                assert!(c.time_us.is_some(), "modelled anyway");
            }
        }
    }
}

// ------------------------------------------------------------ eligibility

#[test]
fn kernel_lists_follow_nccls_id_order() {
    assert_eq!(
        table("2.28").kernel_names(Coll::AllReduce),
        [
            "AllReduce_AGxLL_R",
            "AllReduce_AGxLLMC_R",
            "AllReduce_RSxLD_AGxST",
            "AllReduce_RSxLDMC_AGxSTMC"
        ]
    );
    assert_eq!(
        table("2.30").kernel_names(Coll::AllReduce),
        [
            "AllReduce_AGxLL_R",
            "AllReduce_AGxLLMC_R",
            "AllReduce_RSxTmaLD_AGxTmaST",
            "AllReduce_RSxLD_AGxST",
            "AllReduce_RSxLDMC_AGxSTMC"
        ]
    );
    assert_eq!(table("2.28").kernel_names(Coll::ReduceScatter).len(), 3);
    assert_eq!(table("2.30").kernel_names(Coll::AllGather).len(), 7);
    assert!(table("2.30").kernel_names(Coll::Broadcast).is_empty());
}

#[test]
fn tma_twin_wins_the_tie_by_its_lower_id() {
    // 2.30 sm100 with NCCL_SYM_TMA_ENABLE=1: RSxTmaLD_AGxTmaST has the same model as RSxLD_AGxST
    // and the lower id, so the strict '<' keeps it.
    let mut input = SymmetricInput::new(Coll::AllReduce, 4 * MIB, 4, 100);
    let off = run(&input, "2.30");
    assert_eq!(
        row(&off, "AllReduce_RSxTmaLD_AGxTmaST").ineligible,
        vec![SymReason::NeedsTma]
    );
    assert_eq!(off.pick.as_deref(), Some("AllReduce_RSxLD_AGxST"));
    input.knobs.tma = true;
    let on = run(&input, "2.30");
    assert_eq!(
        row(&on, "AllReduce_RSxTmaLD_AGxTmaST").score_us,
        row(&on, "AllReduce_RSxLD_AGxST").score_us
    );
    assert_eq!(on.pick.as_deref(), Some("AllReduce_RSxTmaLD_AGxTmaST"));
    // sm90 never has TMA kernels, knob or not.
    input.compute_capability = 90;
    assert_eq!(
        run(&input, "2.30").pick.as_deref(),
        Some("AllReduce_RSxLD_AGxST")
    );
}

#[test]
fn ll_kernels_stop_at_2_gib_of_bus_bytes() {
    // AllReduce: bus bytes = nBytes; AllGather: nRanks x nBytes.
    let ar = run(&h200x2(2 * GIB), "2.28");
    assert_eq!(
        row(&ar, "AllReduce_AGxLL_R").ineligible,
        vec![SymReason::LlTooLarge]
    );
    assert!(row(&ar, "AllReduce_RSxLD_AGxST").eligible);
    let just_below = run(&h200x2(2 * GIB - KIB), "2.28");
    assert!(row(&just_below, "AllReduce_AGxLL_R").eligible);
    let ag = run(&SymmetricInput::new(Coll::AllGather, GIB, 2, 90), "2.30");
    assert_eq!(
        row(&ag, "AllGather_LL").ineligible,
        vec![SymReason::LlTooLarge]
    );
}

#[test]
fn reductions_need_a_float_sum_and_2_30_adds_avg() {
    let mut input = h200x2(MIB);
    input.dtype = SymDtype::I32;
    let ints = run(&input, "2.28");
    assert_eq!(
        ints.classic_path,
        vec![SymReason::ReductionNotImplemented(
            RedOp::Sum,
            SymDtype::I32
        )]
    );
    assert!(ints.pick.is_none());
    input.dtype = SymDtype::F64;
    assert!(!run(&input, "2.30").classic_path.is_empty());
    input.dtype = SymDtype::Bf16;
    input.redop = RedOp::Avg;
    assert_eq!(
        run(&input, "2.28").classic_path,
        vec![SymReason::ReductionNotImplemented(
            RedOp::Avg,
            SymDtype::Bf16
        )]
    );
    assert_eq!(
        run(&input, "2.30").pick.as_deref(),
        Some("AllReduce_RSxLD_AGxST")
    );
    // AllGather moves any type.
    let mut ag = SymmetricInput::new(Coll::AllGather, MIB, 2, 90);
    ag.dtype = SymDtype::I64;
    assert!(run(&ag, "2.28").classic_path.is_empty());
    // fp8 reduction kernels exist for sm90+ only.
    let mut fp8 = SymmetricInput::new(Coll::AllReduce, MIB, 2, 80);
    fp8.dtype = SymDtype::F8e4m3;
    assert_eq!(
        run(&fp8, "2.28").classic_path,
        vec![SymReason::Fp8NeedsSm90]
    );
}

#[test]
fn multicast_load_reduce_needs_a_type_multicast_can_add() {
    // 8 ranks, NVLS on, sm90: fp8 load-reduce needs compCap 100; f32 is fine.
    let mut input = SymmetricInput::new(Coll::ReduceScatter, 4 * MIB, 8, 90);
    input.nvls_multicast = true;
    input.dtype = SymDtype::F8e5m2;
    let choice = run(&input, "2.28");
    assert_eq!(
        row(&choice, "ReduceScatter_LDMC").ineligible,
        vec![SymReason::MulticastDtype(SymDtype::F8e5m2)]
    );
    input.compute_capability = 100;
    assert!(row(&run(&input, "2.28"), "ReduceScatter_LDMC").eligible);
}

#[test]
fn peers_nodes_and_ranks_gate_the_whole_path() {
    // 2.28 accepts PCIe peer access; 2.30 wants direct NVLink.
    let mut input = h200x2(MIB);
    input.peers = PeerPath::P2p;
    assert!(run(&input, "2.28").classic_path.is_empty());
    assert_eq!(
        run(&input, "2.30").classic_path,
        vec![SymReason::NeedsNvlink]
    );
    input.peers = PeerPath::NoP2p;
    assert_eq!(
        run(&input, "2.28").classic_path,
        vec![SymReason::NeedsPeerAccess]
    );
    // Several nodes: 2.28 none; 2.30 only GIN kernels, which the planner does not model.
    let mut multi = SymmetricInput::new(Coll::ReduceScatter, MIB, 16, 90);
    multi.n_nodes = 2;
    assert_eq!(
        run(&multi, "2.28").classic_path,
        vec![SymReason::SingleNodeOnly]
    );
    let c30 = run(&multi, "2.30");
    assert_eq!(c30.classic_path, vec![SymReason::GinNotModelled]);
    assert_eq!(
        row(&c30, "ReduceScatter_LD").ineligible,
        vec![SymReason::NeedsOneNvlinkDomain]
    );
    assert!(row(&c30, "ReduceScatter_RailA2A_LsaLD").time_us.is_none());
    // One rank copies.
    let one = run(&SymmetricInput::new(Coll::AllReduce, MIB, 1, 90), "2.30");
    assert!(one.classic_path.contains(&SymReason::OneRank));
    // Broadcast has no symmetric kernels.
    let bc = run(&SymmetricInput::new(Coll::Broadcast, MIB, 2, 90), "2.28");
    assert!(bc.candidates.is_empty());
    assert_eq!(
        bc.classic_path,
        vec![SymReason::NoSymmetricKernels(Coll::Broadcast)]
    );
}

#[test]
fn registration_rules_per_family() {
    // 2.28: both buffers registered or no symmetric path.
    let mut input = h200x2(2 * MIB);
    input.registration = Registration::RecvOnly;
    assert_eq!(
        run(&input, "2.28").classic_path,
        vec![SymReason::NotRegistered(Registration::RecvOnly)]
    );
    // 2.30 AllReduce with one buffer registered: only LL kernels; the LL pick runs only when the
    // classic model would pick LL too.
    let c = run(&input, "2.30");
    assert_eq!(
        row(&c, "AllReduce_RSxLD_AGxST").ineligible,
        vec![SymReason::RegistrationLlOnly(Registration::RecvOnly)]
    );
    assert_eq!(c.pick.as_deref(), Some("AllReduce_AGxLL_R"));
    assert!(c.classic_path.is_empty() && c.only_if_classic_picks_ll);
    // Nothing registered: classic path unless NCCL_SYM_NOWIN_ENABLE=1.
    input.registration = Registration::Neither;
    let none = run(&input, "2.30");
    assert_eq!(none.classic_path, vec![SymReason::UnregisteredNoWindow]);
    assert!(none.runs_symmetric().is_none());
    input.knobs.no_window = true;
    let nowin = run(&input, "2.30");
    assert!(nowin.classic_path.is_empty() && nowin.only_if_classic_picks_ll);
    // A kernel forced by NCCL_SYM_KERNEL runs without the fallback.
    input.knobs.no_window = false;
    input.knobs.sym_kernel = Some("AllReduce_AGxLL_R".into());
    let forced = run(&input, "2.30");
    assert!(forced.classic_path.is_empty() && !forced.only_if_classic_picks_ll);
    // AllGather keeps its whole menu with the receive buffer registered.
    let mut ag = SymmetricInput::new(Coll::AllGather, 4 * MIB, 2, 90);
    ag.registration = Registration::RecvOnly;
    let agc = run(&ag, "2.30");
    assert_eq!(agc.pick.as_deref(), Some("AllGather_ST"));
    assert!(!agc.only_if_classic_picks_ll);
}

#[test]
fn knobs_force_kernels_and_blocks() {
    let mut input = h200x2(GIB);
    input.knobs.sym_kernel = Some("AllReduce_AGxLL_R".into());
    let c = run(&input, "2.28");
    assert_eq!(c.pick.as_deref(), Some("AllReduce_AGxLL_R"));
    assert_eq!(
        row(&c, "AllReduce_RSxLD_AGxST").ineligible,
        vec![SymReason::NotForced("AllReduce_AGxLL_R".into())]
    );
    input.knobs.sym_kernel = Some("AllGather_LL".into());
    assert_eq!(
        run(&input, "2.28").classic_path,
        vec![SymReason::ForcedKernelUnavailable("AllGather_LL".into())]
    );
    // NCCL_SYM_CTAS sets min = max = the value.
    input.knobs.sym_kernel = None;
    input.knobs.sym_ctas = 64;
    assert_eq!(run(&input, "2.28").picked().unwrap().blocks, Some(64));
    // NCCL_MAX_CTAS caps the blocks.
    input.knobs.sym_ctas = 0;
    input.knobs.max_ctas = Some(4);
    assert_eq!(run(&input, "2.28").picked().unwrap().blocks, Some(4));
}

#[test]
fn blackwell_allgather_above_8_mi_elements_goes_to_copy_engines_in_2_30() {
    let input = SymmetricInput::new(Coll::AllGather, 64 * MIB, 4, 100); // 16 Mi floats per rank
    assert_eq!(
        run(&input, "2.30").classic_path,
        vec![SymReason::CopyEngineAllGather]
    );
    assert!(run(&input, "2.28").classic_path.is_empty());
    let small = SymmetricInput::new(Coll::AllGather, 32 * MIB, 4, 100); // exactly 8 Mi floats
    assert!(run(&small, "2.30").classic_path.is_empty());
}

#[test]
fn bad_input_is_named() {
    let t = table("2.28");
    let mut input = h200x2(MIB);
    input.n_ranks = 0;
    let err = symmetric_candidates(&input, &t).unwrap_err();
    assert!(
        matches!(&err, Error::BadInput(m) if m.contains("rank count 0")),
        "{err}"
    );
    let mut odd = h200x2(6);
    odd.dtype = SymDtype::F32;
    let err = symmetric_candidates(&odd, &t).unwrap_err();
    assert!(
        matches!(&err, Error::BadInput(m) if m.contains("6 bytes")),
        "{err}"
    );
    let err = SymmetricTable::builtin("2.19").unwrap_err();
    assert!(err.message().contains("2.19"));
    let broken = include_str!("../../tuning-tables/nccl-symmetric-2.28.json")
        .replace("\"ll_bus_factor\"", "\"ll_bus_factr\"");
    let err = SymmetricTable::parse(&broken, "x.json").unwrap_err();
    assert!(err.message().contains("x.json") && err.message().contains("ll_bus_factor.value"));
    assert_eq!(SymDtype::parse("bfloat16").unwrap(), SymDtype::Bf16);
    assert!(SymDtype::parse("f128").is_err());
}

#[test]
fn choice_serialises_with_units_and_reasons_as_text() {
    let v = serde_json::to_value(run(&h200x2(8), "2.28")).unwrap();
    assert_eq!(v["pick"], "AllReduce_AGxLL_R");
    assert_eq!(v["coll"], "AllReduce");
    let rows = v["candidates"].as_array().unwrap();
    assert!(rows[0]["time_us"].as_f64().unwrap() > 4.0);
    assert!(rows[1]["ineligible"][0]
        .as_str()
        .unwrap()
        .contains("multicast"));
}

// ------------------------------------------------------------ the [Symmetric] log line

#[test]
fn parses_the_symmetric_line_with_nccls_prefix() {
    // Built from the format string "%s [Symmetric]: %ld Bytes -> Kernel %s nchannels %d nthreads
    // %d nWorks %d" (symmetric_sched.cc:225) behind the INFO prefix "host:pid:tid [dev] NCCL INFO ".
    let line = "gpu-node-7:41522:41601 [0] NCCL INFO AllReduce [Symmetric]: 2097152 Bytes -> \
                Kernel AllReduce_RSxLD_AGxST nchannels 7 nthreads 512 nWorks 1";
    let got = parse_symmetric_log_line(line).unwrap();
    assert_eq!(got.coll, Coll::AllReduce);
    assert_eq!(got.bytes, 2097152);
    assert_eq!(got.kernel, "AllReduce_RSxLD_AGxST");
    assert_eq!((got.channels, got.threads, got.works), (7, 512, 1));
    // Matches the model's pick and channel count for that call.
    let choice = run(&h200x2(got.bytes), "2.28");
    assert_eq!(choice.pick.as_deref(), Some(got.kernel.as_str()));
    assert_eq!(choice.picked().unwrap().channels, Some(got.channels));
}

#[test]
fn parses_the_line_behind_mpirun_tags_and_bare() {
    let tagged = "[1,0]<stdout>:node:1:2 [0] NCCL INFO ReduceScatter [Symmetric]: 4096 Bytes -> \
                  Kernel ReduceScatter_LL nchannels 2 nthreads 512 nWorks 3\r";
    let got = parse_symmetric_log_line(tagged).unwrap();
    assert_eq!(
        (got.coll, got.bytes, got.kernel.as_str(), got.works),
        (Coll::ReduceScatter, 4096, "ReduceScatter_LL", 3)
    );
    // As quoted (without prefix) in PyTorch's symmetric-memory docs,
    // https://github.com/pytorch/pytorch/pull/192515 (docs/source/symmetric_memory.md).
    let bare = "AllReduce [Symmetric]: 2097152 Bytes -> Kernel AllReduce_RSxLDMC_AGxSTMC nchannels 16 nthreads 512 nWorks 1";
    let got = parse_symmetric_log_line(bare).unwrap();
    assert_eq!(
        (got.kernel.as_str(), got.channels),
        ("AllReduce_RSxLDMC_AGxSTMC", 16)
    );
}

#[test]
fn other_lines_are_not_symmetric_lines() {
    for line in [
        "",
        "node:1:2 [0] NCCL INFO AllReduce: 1048576 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}",
        "node:1:2 [0] NCCL INFO NCCL version 2.28.3+cuda12.9",
        // truncated or malformed
        "node:1:2 [0] NCCL INFO AllReduce [Symmetric]: 2097152 Bytes -> Kernel",
        "node:1:2 [0] NCCL INFO AllReduce [Symmetric]: -5 Bytes -> Kernel K nchannels 1 nthreads 512 nWorks 1",
        "node:1:2 [0] NCCL INFO AllReduce [Symmetric]: 8 Bytes -> Kernel K nchannels x nthreads 512 nWorks 1",
        "node:1:2 [0] NCCL INFO AlltoAll [Symmetric]: 8 Bytes -> Kernel K nchannels 1 nthreads 512 nWorks 1",
    ] {
        assert_eq!(parse_symmetric_log_line(line), None, "{line}");
    }
}
