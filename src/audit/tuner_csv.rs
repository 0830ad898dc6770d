//! NCCL's example tuner plugin config (`ext-tuner/example/nccl_tuner.conf`, CSV), read as the plugin reads it, and
//! an NCCL log of a run that used it compared with its rules, call by call.
//!
//! The format (`ext-tuner/example/plugin.c` at v2.28.3-1, `loadConfig` and `pluginGetCollInfo`): one rule a line,
//! `colltype,minbytes,maxbytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]`; a line whose first
//! character is `#` and an empty line are skipped; fields are split at commas and trimmed of spaces and tabs;
//! `channels` -1 keeps NCCL's, `nNodes`/`nRanks`/`numPipeOps`/`regBuff` -1 match any value (the last two default to
//! -1 when left out). A call takes the first rule, in file order, whose collective, `minbytes <= nBytes <= maxbytes`,
//! node and rank counts (and pipeline ops, registration) match and whose pair NCCL has not masked; a masked pair
//! moves on to the next matching rule. The plugin reads an unknown name as allreduce, ring or simple and a line of
//! fewer than 8 or more than 10 fields as no rule: planner refuses both (exit 2, naming the line), since such a
//! file does not say what its author meant.

use crate::error::{Error, Result};
use crate::model::{Algo, Coll, Proto};
use crate::nccl_log::NcclLog;
use serde::Serialize;

/// `MAX_LINE_LENGTH` of the example plugin: `fgets` splits longer lines.
const MAX_LINE: usize = 255;
/// The plugin's collective, algorithm and protocol spellings, in NCCL's index order (`plugin.c:58-115`).
const COLLS: [&str; 5] = [
    "broadcast",
    "reduce",
    "allgather",
    "reducescatter",
    "allreduce",
];
const ALGOS: [&str; 7] = [
    "tree",
    "ring",
    "collnet_direct",
    "collnet_chain",
    "nvls",
    "nvls_tree",
    "pat",
];
const PROTOS: [&str; 3] = ["ll", "ll128", "simple"];

fn coll_name<S: serde::Serializer>(coll: &Coll, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(coll.nccl_name())
}

/// One rule of the file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CsvRule {
    /// 1-based line in the file.
    pub line: usize,
    #[serde(serialize_with = "coll_name")]
    pub collective: Coll,
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub algorithm: Algo,
    pub protocol: Proto,
    /// -1: NCCL's channel count.
    pub channels: i64,
    /// -1: any.
    pub n_nodes: i64,
    pub n_ranks: i64,
    pub num_pipe_ops: i64,
    pub reg_buff: i64,
}

impl CsvRule {
    /// `Ring/LL`.
    pub fn pair(&self) -> String {
        format!(
            "{}/{}",
            self.algorithm.nccl_name(),
            self.protocol.nccl_name()
        )
    }

    /// Whether the rule applies to this call (pipeline ops and registration as given).
    pub fn matches(&self, call: &CallShape) -> bool {
        let any = |rule: i64, value: i64| rule == -1 || rule == value;
        self.collective == call.collective
            && call.n_bytes >= self.min_bytes
            && call.n_bytes <= self.max_bytes
            && any(self.n_nodes, call.n_nodes)
            && any(self.n_ranks, call.n_ranks)
            && any(self.num_pipe_ops, call.num_pipe_ops)
            && any(self.reg_buff, call.reg_buff)
    }
}

/// What the plugin sees of one call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallShape {
    pub collective: Coll,
    pub n_bytes: u64,
    pub n_nodes: i64,
    pub n_ranks: i64,
    pub num_pipe_ops: i64,
    pub reg_buff: i64,
}

/// A whole config file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TunerCsv {
    pub source: String,
    pub rules: Vec<CsvRule>,
}

/// Whether `text` is an example-tuner CSV rather than a JSON plan (`tune --show` reads both).
pub fn looks_like_csv(text: &str) -> bool {
    !text.trim_start().starts_with('{')
}

impl TunerCsv {
    pub fn load(path: &str) -> Result<TunerCsv> {
        let text = crate::fsio::read_input_file(path)?;
        TunerCsv::parse(&text, path)
    }

    /// Every rule of `text` (`source` names it in messages).
    pub fn parse(text: &str, source: &str) -> Result<TunerCsv> {
        let mut rules = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let number = i + 1;
            let line = raw.strip_suffix('\r').unwrap_or(raw);
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |why: String| Error::bad_input(format!("{source}:{number}: {why}"));
            if line.len() > MAX_LINE {
                return Err(bad(format!(
                    "a line of {} characters; NCCL's example plugin reads lines of at most {MAX_LINE}",
                    line.len()
                )));
            }
            // strtok: consecutive commas are one separator, empty fields do not exist.
            let fields: Vec<&str> = line
                .split(',')
                .map(|f| f.trim_matches(|c| c == ' ' || c == '\t'))
                .filter(|f| !f.is_empty())
                .collect();
            if !(8..=10).contains(&fields.len()) {
                return Err(bad(format!(
                    "{} fields; a rule has 8 to 10 (colltype,minbytes,maxbytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]), and NCCL's example plugin would skip this line",
                    fields.len()
                )));
            }
            let name = |field: &str, names: &[&str], what: &str| {
                names.iter().position(|n| *n == field).ok_or_else(|| {
                    bad(format!(
                        "unknown {what} '{field}' (known: {}); NCCL's example plugin would read it as its default",
                        names.join(", ")
                    ))
                })
            };
            let bytes = |field: &str, what: &str| {
                field
                    .parse::<u64>()
                    .map_err(|_| bad(format!("{what} '{field}' is not a byte count")))
            };
            let int = |field: &str, what: &str| {
                field
                    .parse::<i64>()
                    .ok()
                    .filter(|v| *v >= -1 && *v <= i64::from(i32::MAX))
                    .ok_or_else(|| bad(format!("{what} '{field}' is not -1 or a count")))
            };
            let rule = CsvRule {
                line: number,
                collective: Coll::ALL[name(fields[0], &COLLS, "collective")?],
                min_bytes: bytes(fields[1], "minbytes")?,
                max_bytes: bytes(fields[2], "maxbytes")?,
                algorithm: Algo::ALL[name(fields[3], &ALGOS, "algorithm")?],
                protocol: Proto::ALL[name(fields[4], &PROTOS, "protocol")?],
                channels: int(fields[5], "channels")?,
                n_nodes: int(fields[6], "nNodes")?,
                n_ranks: int(fields[7], "nRanks")?,
                num_pipe_ops: fields.get(8).map_or(Ok(-1), |f| int(f, "numPipeOps"))?,
                reg_buff: fields.get(9).map_or(Ok(-1), |f| int(f, "regBuff"))?,
            };
            if rule.min_bytes > rule.max_bytes {
                return Err(bad(format!(
                    "minbytes {} above maxbytes {}: the rule matches no call",
                    rule.min_bytes, rule.max_bytes
                )));
            }
            rules.push(rule);
        }
        if rules.is_empty() {
            return Err(Error::bad_input(format!(
                "{source}: no rule (NCCL's example tuner config: colltype,minbytes,maxbytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]])"
            )));
        }
        Ok(TunerCsv {
            source: source.to_string(),
            rules,
        })
    }

    /// The matching rules of a call, in the order the plugin tries them.
    pub fn matching(&self, call: &CallShape) -> Vec<&CsvRule> {
        self.rules.iter().filter(|r| r.matches(call)).collect()
    }
}

/// Where the log says NCCL's example tuner loaded its config (`TUNER/ExamplePlugin: Loaded N tuning configurations
/// from PATH`), and the line.
pub fn config_named_by_log(text: &str) -> Option<(String, usize)> {
    text.lines().enumerate().find_map(|(i, l)| {
        let rest = l.split_once("TUNER/ExamplePlugin: Loaded ")?.1;
        let path = rest.split_once(" tuning configurations from ")?.1;
        Some((path.trim().to_string(), i + 1))
    })
}

/// How one per-call line of the log compares with the file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CsvCallCheck {
    /// Line of NCCL's per-call line in the log.
    pub log_line: usize,
    #[serde(serialize_with = "coll_name")]
    pub collective: Coll,
    pub n_bytes: u64,
    /// NCCL ran this.
    pub nccl_pair: String,
    /// The first matching rule's line and pair.
    pub rule_line: usize,
    pub rule_pair: String,
}

/// The log's per-call choices against the file's rules.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CsvAudit {
    pub file: String,
    pub rules: usize,
    /// Per-call lines compared (rank 0's INFO lines; TRACE lines where there are none).
    pub calls: usize,
    /// Calls in no rule's range: NCCL's own choice, nothing to compare.
    pub no_rule: usize,
    /// NCCL ran the first matching rule's pair.
    pub followed: usize,
    /// NCCL ran a later matching rule's pair (the plugin moves on where NCCL masked the first one's).
    pub followed_later_rule: usize,
    /// NCCL ran a pair no matching rule names: the differences.
    pub differences: Vec<CsvCallCheck>,
    /// How pipeline ops and registration were taken (the per-call line does not say).
    pub assumed: String,
}

/// Compare `log` (its per-call lines, the communicator's nRanks and nNodes) with `csv`. Rules that name
/// numPipeOps or regBuff are matched as for one op per call and unregistered buffers (nccl-tests' defaults), which
/// `assumed` says.
pub fn audit_csv(log: &NcclLog, csv: &TunerCsv) -> Result<CsvAudit> {
    let (Some(n_ranks), Some(n_nodes)) = (log.n_ranks, log.n_nodes) else {
        return Err(Error::bad_input(format!(
            "{}: no `comm ... nRanks ... nNodes` line, so the rules' nRanks/nNodes cannot be matched",
            log.source
        )));
    };
    let info: Vec<_> = log.calls.iter().filter(|c| !c.trace).collect();
    let calls: Vec<_> = if info.is_empty() {
        log.calls.iter().collect()
    } else {
        info
    };
    let mut out = CsvAudit {
        file: csv.source.clone(),
        rules: csv.rules.len(),
        calls: 0,
        no_rule: 0,
        followed: 0,
        followed_later_rule: 0,
        differences: Vec::new(),
        assumed: "numPipeOps 1 and regBuff 0 (one op per call, unregistered buffers: the per-call line does not say)"
            .into(),
    };
    for call in calls {
        let Some(collective) = call.coll else {
            continue;
        };
        out.calls += 1;
        let shape = CallShape {
            collective,
            n_bytes: call.n_bytes(n_ranks),
            n_nodes: n_nodes as i64,
            n_ranks: n_ranks as i64,
            num_pipe_ops: 1,
            reg_buff: 0,
        };
        let matching = csv.matching(&shape);
        let Some(first) = matching.first() else {
            out.no_rule += 1;
            continue;
        };
        let ran = |r: &&CsvRule| r.algorithm == call.algo && r.protocol == call.proto;
        if ran(first) {
            out.followed += 1;
        } else if matching.iter().skip(1).any(ran) {
            out.followed_later_rule += 1;
        } else {
            out.differences.push(CsvCallCheck {
                log_line: call.line,
                collective,
                n_bytes: shape.n_bytes,
                nccl_pair: format!("{}/{}", call.algo.nccl_name(), call.proto.nccl_name()),
                rule_line: first.line,
                rule_pair: first.pair(),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rules in the example file's layout (written here, not copied): comments, blank lines, trimmed fields, the two
    /// optional fields and -1 wildcards, as the plugin reads them.
    #[test]
    fn reads_the_example_rules_with_optional_fields_and_wildcards() {
        let text = "# comment\n\nallreduce,0,32768,tree,simple,2,1,-1,-1,1\n allreduce , 32769,2097152,ring,simple,8,4,32,1,0\nallgather,0,1073741824,ring,simple,4,2,-1\n";
        let csv = TunerCsv::parse(text, "t.conf").unwrap();
        assert_eq!(csv.rules.len(), 3);
        assert_eq!(csv.rules[0].line, 3);
        assert_eq!(csv.rules[0].pair(), "Tree/Simple");
        assert_eq!(csv.rules[0].reg_buff, 1);
        assert_eq!(csv.rules[1].collective, Coll::AllReduce);
        assert_eq!(csv.rules[1].n_ranks, 32);
        assert_eq!(csv.rules[2].num_pipe_ops, -1);
        assert_eq!(csv.rules[2].reg_buff, -1);
        let call = CallShape {
            collective: Coll::AllGather,
            n_bytes: 1 << 20,
            n_nodes: 2,
            n_ranks: 16,
            num_pipe_ops: 1,
            reg_buff: 0,
        };
        assert_eq!(csv.matching(&call).len(), 1);
        assert!(csv.matching(&CallShape { n_nodes: 1, ..call }).is_empty());
        // regBuff 1 in rule 0: an unregistered call does not match it.
        let small = CallShape {
            collective: Coll::AllReduce,
            n_bytes: 1024,
            n_nodes: 1,
            n_ranks: 8,
            ..call
        };
        assert!(csv.matching(&small).is_empty());
        assert_eq!(
            csv.matching(&CallShape {
                reg_buff: 1,
                ..small
            })
            .len(),
            1
        );
    }

    #[test]
    fn refuses_what_the_plugin_would_misread() {
        for (text, says) in [
            ("allreduce,0,1,ring,ll,-1,-1\n", "t.conf:1: 7 fields"),
            (
                "allreduce,0,1,rings,ll,-1,-1,-1\n",
                "unknown algorithm 'rings'",
            ),
            (
                "alltoall,0,1,ring,ll,-1,-1,-1\n",
                "unknown collective 'alltoall'",
            ),
            ("allreduce,0,1,ring,LL,-1,-1,-1\n", "unknown protocol 'LL'"),
            ("allreduce,-1,1,ring,ll,-1,-1,-1\n", "minbytes '-1'"),
            ("allreduce,9,1,ring,ll,-1,-1,-1\n", "above maxbytes"),
            ("# only a comment\n", "t.conf: no rule"),
        ] {
            let err = TunerCsv::parse(text, "t.conf").unwrap_err();
            assert_eq!(err.exit_code(), 2, "{text}");
            assert!(err.to_string().contains(says), "{text}: {err}");
        }
        assert!(looks_like_csv("allreduce,0,1,ring,ll,-1,-1,-1\n"));
        assert!(!looks_like_csv("  {\"format\": 1}"));
    }

    #[test]
    fn finds_the_config_the_log_names() {
        let log = "h:1:1 [0] NCCL INFO TUNER/Plugin: Using Example (v4)\nh:1:1 [0] NCCL INFO TUNER/ExamplePlugin: Loaded 2 tuning configurations from /tmp/nccl_tuner.conf\n";
        assert_eq!(
            config_named_by_log(log),
            Some(("/tmp/nccl_tuner.conf".to_string(), 2))
        );
        assert_eq!(config_named_by_log("no tuner here\n"), None);
    }
}
