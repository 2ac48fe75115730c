import Testing

/// Every suite of the stress target, run one test at a time, so that the two threads of each race
/// have both cores to themselves when the target runs alone (as CI's release stage runs it).
@Suite(.serialized) enum StressSuites {}
