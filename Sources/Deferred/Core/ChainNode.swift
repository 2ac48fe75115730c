public import Synchronization

/// A node of the graph that the library's combinators build: a storage, or a join that fills
/// one.
///
/// Each handler that a combinator adds holds the node it continues. Released naively, an
/// unfilled chain of a million `map`s would release a million storages by recursion and
/// overflow the stack; ``ReleaseStack/releaseAll()`` walks the same graph with a loop instead.
///
/// This is a class rather than a protocol so that `isKnownUniquelyReferenced` can look at it.
/// It holds no state; subclasses document their own thread safety.
@usableFromInline
internal class ChainNode: @unchecked Sendable {
    @inlinable
    internal init() {}

    /// Moves the nodes downstream of this one into `nodes` and drops everything else this node
    /// would release, so that releasing it releases nothing recursively.
    ///
    /// Called only on a node that nobody else holds strongly any more. A weak reference (an
    /// attempt's pending time limit) may still revive the node while this runs, and the revived
    /// node is then used as if nothing had happened: an override takes only what it takes with
    /// one atomic step that the node's other operations respect (its handlers), never a field
    /// that those operations read without such a step.
    @usableFromInline
    internal func detachDownstream(to nodes: inout ReleaseStack) {}

    /// One of this node's deciders is gone: a link to it will never run, and something else
    /// still holds the node.
    ///
    /// A node that nothing else can decide any more finishes
    /// without a value (an attempt is *orphaned*), handing the nodes of its own links to `nodes`
    /// as lost; the default does nothing, which is right for a node that does not wait on
    /// anything (a waiter, a future's combinator).
    @usableFromInline
    internal func lostDecider(to nodes: inout ReleaseStack) {}

    /// A consumer that held a unit of this node's demand releases it (gives it back, as a
    /// reader that waited, if `givingBack`).
    ///
    /// What that stops goes to `nodes`, so that a cancellation travels up a chain of any depth
    /// without recursion. The default does nothing: only an attempt counts demand.
    @usableFromInline
    internal func releaseUnit(givingBack: Bool, to nodes: inout ReleaseStack) {}

    /// Releases the step of a node whose link was released unrun.
    ///
    /// That link was its source's handler, or the body that would run the step, so nothing else
    /// touches the step any more: what an attempt that lost its deciders, or a consumer whose
    /// link ``ConsumerLinks`` removed, does. The default holds no step.
    @usableFromInline
    internal func dropUnrunStep() {}

    /// Whether this node is an attempt that is decided (or being decided); `false` for any
    /// other node.
    ///
    /// Then a link to it has nothing left to do, which lets ``ConsumerLinks`` remove a departed
    /// consumer's link; and no count of its demand matters any more, so a unit of it is
    /// released by dropping the reference alone, which goes no deeper than the node.
    @usableFromInline
    internal var hasDecided: Bool {
        false
    }

    /// Returns once a decision that ``hasDecided`` reports is published, if one is; its decider
    /// runs nothing between its claim and its publication, so this waits for no code of anyone's.
    @usableFromInline
    internal func awaitDecision() {}

    // MARK: What the deadline ledger asks (see ``DeadlineLedger``)

    /// This node's demand word, if it counts demand as an attempt does (see ``DemandState``);
    /// `nil` for any other node.
    @usableFromInline
    internal func loadDemand() -> UInt? {
        nil
    }

    /// Marks an attempt as tracked by the deadline ledger and returns its demand word as it was
    /// before; `nil` for any other node, which has nothing to mark.
    @usableFromInline
    internal func markTracked() -> UInt? {
        nil
    }

    /// The source an attempt holds a unit of now, read without taking it.
    ///
    /// `nil` for a root, an attempt whose demand ended, and any other node. Only the ledger,
    /// under its lock, reads it.
    @usableFromInline
    internal func currentSource() -> ChainNode? {
        nil
    }

    /// Whether an attempt that a unit of this node stands for is tracked by the deadline ledger.
    @usableFromInline
    internal var hasTrackedSource: Bool {
        false
    }

    /// Calls `body` with each attempt that a unit of this node stands for: the node itself, or a
    /// join's inputs.
    @usableFromInline
    internal func forEachCountedSource(_ body: (ChainNode) -> Void) {
        body(self)
    }

    // MARK: What a dump of pending chains asks (see ``PendingFutures``)

    /// What this node is when a recorded storage links it; asked on the thread that links it.
    internal var traceKind: TraceNodeKind {
        .none
    }

    /// The storage a join fills, for a node whose ``traceKind`` is `join`.
    internal var traceOutput: ChainNode? {
        nil
    }

    /// How a dump names the stages linked to this node, if not by their own operator: a shared
    /// run's callers.
    internal var traceDependentName: String? {
        nil
    }

    /// How a dump names this node as a stage: its operator, such as `map`.
    internal var traceName: String {
        "stage"
    }

    /// Whether this node still waits: a storage that is not filled, a waiter that has not
    /// given up.
    internal var traceIsPending: Bool {
        false
    }

    /// Whether anything is registered on this node, a storage, for its value.
    internal var traceIsWaitedFor: Bool {
        false
    }

    /// What a dump reads of this node, in one call on the node itself, so that the reader takes
    /// no reference of its own (see ``readStorage(at:)``).
    internal func traceRead() -> TraceRead {
        TraceRead(isPending: traceIsPending, isWaitedFor: traceIsWaitedFor, name: traceName)
    }

    /// Records that something received, or registered for, the value of this node, a recorded
    /// storage; nothing for any other node.
    internal func markObserved() {}

    /// Makes this node, a storage, report to ``PendingFutures`` the links stored on it and its
    /// release; nothing for any other node.
    internal func markTraced() {}

    /// Releases the nodes downstream of this one with a loop: what the `deinit` of a node
    /// that may hold the only reference to a long chain calls.
    @usableFromInline
    internal final func releaseDownstream() {
        var nodes = ReleaseStack()
        detachDownstream(to: &nodes)
        nodes.releaseAll()
    }

    /// `node`, a node that a handler or a drain queue handed back, as the type it was linked
    /// as: the one place the library narrows a node's type without checking it.
    ///
    /// The invariant that makes it sound: a ``Handler`` link passes its step exactly the node
    /// it was made with, a ``ParkedHandlers`` entry exactly the storage it parked, and a
    /// ``LimitTimer`` exactly the node it limits; each step, entry or expiry is made beside that
    /// node, by code that names the node's type, and the source of a `sourcedLink` is the
    /// attempt node that runs it. Debug builds check it.
    @inlinable
    @inline(__always)
    internal static func linked(_ node: ChainNode) -> Self {
        assert(node is Self, "a link step received a node of another type")
        return unsafeDowncast(node, to: Self.self)
    }
}

/// Nodes to release with a loop rather than recursion.
///
/// An owner that may hold the only reference to a long chain pushes what it holds here in its
/// `deinit` and calls ``releaseAll()``. A chain hands over one node at a time, so the top of the
/// stack lives inline: releasing a chain touches no array.
///
/// A node pushed as *lost* comes from a link that will never run (its storage was released
/// unfilled, or orphaned): if something else still holds it, it is told that it lost a decider
/// (``ChainNode/lostDecider(to:)``), in the same loop. A node pushed as a *unit* was held by a
/// consumer that gives up its unit of demand on it (see ``DemandState``): it is told first
/// (``ChainNode/releaseUnit(givingBack:to:)``), so that cancellation travels up a chain of any
/// depth in the same loop.
@usableFromInline
internal struct ReleaseStack {
    /// What releasing an entry means besides dropping the reference.
    @usableFromInline
    internal enum Kind {
        /// Only the reference.
        case reference
        /// A link to the node will never run.
        case lost
        /// A consumer releases its unit of demand on the node.
        case unit
        /// A reader gives back the unit it held while it waited.
        case givenBackUnit
        /// A consumer's link to the node was removed unrun (see ``ConsumerLinks``): its unrun
        /// step goes.
        case removedLink
    }

    /// The node pushed last, if any.
    @usableFromInline
    internal var top: ChainNode? = nil

    /// What releasing ``top`` means.
    @usableFromInline
    internal var topKind = Kind.reference

    /// The nodes below ``top``, oldest first, each with what releasing it means.
    @usableFromInline
    internal var below: [(node: ChainNode, kind: Kind)] = []

    /// The handlers of the attempts that the releases decide (as they stop), parked until every
    /// node is released: a cancellation reaches every producer above before any handler of what
    /// it cancelled runs.
    @usableFromInline
    internal var completions = DrainQueue(parking: true)

    /// Why the consumers whose units this loop releases leave, as ``DemandState`` records it in
    /// an attempt that their leaving stops (zero: nobody needs it any more).
    @usableFromInline
    internal var stopReasonBits: UInt = 0

    @inlinable
    internal init() {}

    /// A release loop whose consumers leave for `reasonBits` (see ``stopReasonBits``).
    @inlinable
    internal init(stopReasonBits reasonBits: UInt) {
        stopReasonBits = reasonBits
    }

    /// Adds `node` to the nodes to release.
    @usableFromInline
    internal mutating func push(_ node: ChainNode) {
        push(node, kind: .reference)
    }

    /// Adds `node`, whose link will never run, to the nodes to release.
    @usableFromInline
    internal mutating func pushLost(_ node: ChainNode) {
        push(node, kind: .lost)
    }

    /// Adds `node`, on which a consumer releases its unit of demand (gives it back, as a reader
    /// that waited, if `givingBack`), to the nodes to release.
    @usableFromInline
    internal mutating func pushUnit(_ node: ChainNode, givingBack: Bool = false) {
        push(node, kind: givingBack ? .givenBackUnit : .unit)
    }

    @usableFromInline
    internal mutating func push(_ node: ChainNode, kind: Kind) {
        if let previous = top {
            below.append((previous, topKind))
        }
        top = node
        topKind = kind
    }

    /// Makes room for `count` more nodes, so that pushing a node's several downstream nodes
    /// grows the stack once.
    @usableFromInline
    internal mutating func reserve(_ count: Int) {
        below.reserveCapacity(below.count + count)
    }

    /// Releases every node, and whatever only they keep alive: a unit is released first; a node
    /// nothing else references then hands what it holds to the stack, so releasing it recurses
    /// no further; a lost node that something else still references is told so.
    @usableFromInline
    internal mutating func releaseAll() {
        while true {
            var node: ChainNode
            let kind: Kind
            if let next = top {
                top = nil
                node = next
                kind = topKind
            } else if let entry = below.popLast() {
                node = entry.node
                kind = entry.kind
            } else {
                completions.isRunning = false
                completions.drain()
                return
            }
            if kind == .unit || kind == .givenBackUnit {
                node.releaseUnit(givingBack: kind == .givenBackUnit, to: &self)
            } else if kind == .removedLink {
                node.dropUnrunStep()
            }
            if isKnownUniquelyReferenced(&node) {
                node.detachDownstream(to: &self)
            } else if kind == .lost {
                node.lostDecider(to: &self)
            }
        }
    }
}

/// What a callback that may be dropped unrun captures instead of the node it moves on: a body a
/// node submits to an executor (a step, the work of `Attempt(upon:catching:)`, a delay's timer,
/// the bodies that move a retry loop on), or the `upon` callback given to a future written
/// outside the library.
///
/// Released without running, it reports that the node lost that decider, as a storage does for
/// a link it will never run (guarantee 17): a pending attempt that nothing else can decide is
/// orphaned. A node decided meanwhile (cancelled, say) only lets go of the step that will never
/// run, which nothing else touches once its body is gone. The node may stay pending after the
/// callback ran (a retry loop waits out its backoff, an `andThen` follows the attempt its step
/// started), so the callback says itself whether it ran: one relaxed store as it runs.
@usableFromInline
internal struct DroppableCallback<Node: ChainNode>: ~Copyable, Sendable {
    /// The node the callback moves on.
    @usableFromInline
    internal let node: Node

    /// Whether the callback ran.
    @usableFromInline
    internal let ran = Atomic<Bool>(false)

    @inlinable
    internal init(_ node: Node) {
        self.node = node
    }

    /// Runs `body`, the callback's work, with the node.
    @inlinable
    internal func run(_ body: (Node) -> Void) {
        ran.store(true, ordering: .relaxed)
        body(node)
    }

    deinit {
        // Relaxed: a callback released after it ran is released where it ran, or after the
        // executor's or the future's own synchronization with that thread.
        guard !ran.load(ordering: .relaxed) else {
            return
        }
        if node.hasDecided {
            node.dropUnrunStep()
        } else {
            var nodes = ReleaseStack()
            nodes.pushLost(node)
            nodes.releaseAll()
        }
    }
}
