/// The pure part of a dump: from a snapshot of the recorded futures, with what each waits on and
/// what waits on it, to the pending chains and the lints of what is still pending.
///
/// It touches no node and takes no lock, so it is tested without threads; ``PendingFutures``
/// takes the snapshot (see ``TraceRegistry``).
internal struct PendingGraph<Key: Hashable> {
    /// One recorded future or attempt, as it was when the snapshot was taken.
    struct Node {
        /// Its identity.
        let key: Key
        /// Its order among the records: older first.
        let order: Int
        /// Whether it is still waiting for its value.
        let isPending: Bool
        /// Whether work still runs for it: it is pending, or it is an attempt whose writer its
        /// producer still holds (a cancelled attempt whose producer has not finished).
        let workRuns: Bool
        /// How a chain shows it.
        let link: PendingLink
        /// The recorded futures it waits on.
        let sources: [Key]
        /// What still waits on it, other than stages: callbacks, threads, tasks, each with the
        /// order of its record.
        let waiters: [(link: PendingLink, order: Int)]
        /// If it gave up on its sources (a limit passed, a shared run's callers left), why, how
        /// long ago, and its name then.
        let gaveUp: (kind: PendingLint.Kind, ago: Duration, name: String)?
    }

    /// The nodes by key.
    private let nodes: [Key: Node]

    /// The pending nodes that wait on each key, oldest first.
    private let dependents: [Key: [Node]]

    init(_ nodes: [Node]) {
        self.nodes = Dictionary(nodes.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
        var dependents: [Key: [Node]] = [:]
        for node in nodes.sorted(by: { $0.order < $1.order }) where node.isPending {
            for source in Set(node.sources) {
                dependents[source, default: []].append(node)
            }
        }
        self.dependents = dependents
    }

    /// Whether `key` names a pending node of the snapshot.
    private func isPending(_ key: Key) -> Bool {
        nodes[key]?.isPending ?? false
    }

    /// Every pending chain: from each pending node that waits on no pending node, down each path
    /// of pending stages to each waiter, or to a stage nothing waits for; oldest source first.
    func chains() -> [PendingChain] {
        let roots = nodes.values.filter { node in
            node.isPending && !node.sources.contains(where: isPending)
        }.sorted { $0.order < $1.order }
        var chains: [PendingChain] = []
        for root in roots {
            collect(from: root, into: &chains)
        }
        return chains
    }

    /// The pending chains that start at `key`: none if it is not pending.
    func chains(from key: Key) -> [PendingChain] {
        guard let node = nodes[key], node.isPending else {
            return []
        }
        var chains: [PendingChain] = []
        collect(from: node, into: &chains)
        return chains
    }

    /// A step of ``collect(from:into:)``: enter a node, or leave it.
    private enum Step {
        case enter(Node)
        case leave(Key)
    }

    /// Adds the chains that start at `root` to `chains`: its waiters first, then the chains
    /// through each stage below it, oldest first.
    ///
    /// A loop over an explicit stack with one list of links for the path it is on, so that a
    /// chain of any depth takes no stack and time in proportion to its length.
    private func collect(from root: Node, into chains: inout [PendingChain]) {
        var links: [PendingLink] = []
        var onPath: Set<Key> = []
        var steps = [Step.enter(root)]
        while let step = steps.popLast() {
            switch step {
            case .leave(let key):
                links.removeLast()
                onPath.remove(key)
            case .enter(let node):
                links.append(node.link)
                onPath.insert(node.key)
                let below = (dependents[node.key] ?? []).filter { !onPath.contains($0.key) }
                let waiters = node.waiters.sorted { $0.order < $1.order }
                if waiters.isEmpty && below.isEmpty {
                    chains.append(PendingChain(links: links))
                }
                for waiter in waiters {
                    chains.append(PendingChain(links: links + [waiter.link]))
                }
                steps.append(.leave(node.key))
                steps += below.reversed().map(Step.enter)
            }
        }
    }

    /// The lints of what is still pending: each node that gave up while work above it still
    /// runs, and each waiter that has waited longer than `longWait`; each with the order of the
    /// record it is about, which identifies it.
    func lints(longWait: Duration?) -> [(lint: PendingLint, order: Int)] {
        var lints: [(lint: PendingLint, order: Int)] = []
        for node in nodes.values.sorted(by: { $0.order < $1.order }) {
            if let gaveUp = node.gaveUp, let running = runningWork(above: node) {
                lints.append(
                    (PendingLint(kind: gaveUp.kind, message: gaveUpMessage(node, gaveUp, running)), node.order))
            }
            guard let longWait, node.isPending else {
                continue
            }
            for waiter in node.waiters where waiter.link.age > longWait {
                let message =
                    "\(waiter.link) has waited longer than \(longWait) for \(node.link.name)"
                    + (node.link.place.map { " made at \($0)" } ?? "")
                lints.append((PendingLint(kind: .longWait, message: message), waiter.order))
            }
        }
        return lints
    }

    /// The highest node above `node` (through its sources, and theirs) for which work still
    /// runs, if any.
    private func runningWork(above node: Node) -> Node? {
        var found: Node?
        var seen: Set<Key> = [node.key]
        var next = node.sources
        while let key = next.popLast() {
            guard seen.insert(key).inserted, let source = nodes[key] else {
                continue
            }
            if source.workRuns {
                found = source
            }
            next += source.sources
        }
        return found
    }

    private func gaveUpMessage(
        _ node: Node, _ gaveUp: (kind: PendingLint.Kind, ago: Duration, name: String), _ running: Node
    ) -> String {
        let ago = PendingLink.format(gaveUp.ago)
        switch gaveUp.kind {
        case .sharedRunWithoutCallers:
            return "every caller of \(gaveUp.name) left \(ago) ago, and its work still runs: \(running.link)"
        default:
            return "\(gaveUp.name) passed \(ago) ago, and the work it limits still runs: \(running.link)"
        }
    }
}
