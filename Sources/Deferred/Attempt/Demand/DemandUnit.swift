/// A unit of demand on an attempt's hub, as its holder releases it: the hub and the depth down
/// to which the unit needs the stages of the hub's path.
///
/// Depth 0 needs only the hub's own attempt (its producer); ``path`` needs every stage, since it
/// is held at the end of the path; any depth between is a *side unit*, counted in the hub's
/// ``SideDemand`` so that the stages below it know it does not need them.
@frozen
@usableFromInline
internal struct DemandUnit {
    @usableFromInline
    internal let hub: AttemptHub

    @usableFromInline
    internal let depth: Int

    @inlinable
    internal init(_ hub: AttemptHub, depth: Int) {
        self.hub = hub
        self.depth = depth
    }

    /// The depth of the path unit.
    @inlinable
    internal static var path: Int { .max }

    /// Whether this is a side unit, counted in the hub's ``SideDemand``.
    @inlinable
    internal var isSide: Bool { depth > 0 && depth != Self.path }

    /// Releases this unit, cancelling what it leaves without demand; see
    /// ``AttemptHub/releaseUnit(_:returning:)``.
    @inlinable
    internal func release(returning: Bool = false) {
        AttemptHub.releaseUnit(self, returning: returning)
    }
}

/// What a dependent that continues an attempt's path must do; see
/// ``AttemptNode/takePath(countingSidesOn:)``.
@usableFromInline
internal enum PathTaking {
    /// The attempt handed over the path unit it held.
    case handedOver
    /// The attempt keeps its unit, which becomes a side unit at this depth; take a new path unit.
    case converting(Int)
    /// The attempt held no unit; take a new path unit.
    case fresh
    /// Another dependent continues the path already.
    case alreadyTaken
}

/// The demand a transparent attempt starts with (see ``Attempt/shareDemand()``): the hub it
/// uses and its first flags — a stage on its source's path, at its depth, holding the path unit
/// or not; a stage that owns a new hub holding a unit on its source's; or, below a source that
/// has its result already, a stage that needs nothing upstream and makes a hub only if asked.
@frozen
@usableFromInline
internal struct DerivedDemand {
    @usableFromInline
    internal let hub: AttemptHub?

    @usableFromInline
    internal let flags: UInt

    @inlinable
    internal init(hub: AttemptHub?, flags: UInt) {
        self.hub = hub
        self.flags = flags
    }
}

/// What an attempt's hub holds upstream, taken out of ``AttemptHub/upstream``.
@usableFromInline
internal enum HeldUnits {
    case none
    case one(DemandUnit)
    case many(DemandUnits)

    /// Reads what `held` (with its `marked` bit) stands for.
    @inlinable
    internal init(_ held: ChainNode?, marked: Bool) {
        switch held {
        case let hub as AttemptHub:
            self = .one(DemandUnit(hub, depth: marked ? DemandUnit.path : 0))
        case let list as DemandUnits:
            self = .many(list)
        default:
            self = .none
        }
    }

    /// Releases every unit; see ``AttemptHub/releaseUnit(_:returning:)``.
    @inlinable
    internal func release() {
        switch self {
        case .none:
            break
        case .one(let unit):
            unit.release()
        case .many(let list):
            for unit in list.units {
                unit.release()
            }
        }
    }
}

/// Units that one attempt holds upstream, when they are not a single plain or path unit (see
/// ``AttemptHub/upstream``): several attempts it waits for at once (a join), or a side unit.
///
/// `@unchecked Sendable` is sound because `units` is set in `init` and changed only by
/// ``detachDownstream(to:)``, which runs only when nothing else references the list.
@usableFromInline
internal final class DemandUnits: ChainNode, @unchecked Sendable {
    /// The units.
    @exclusivity(unchecked)
    @usableFromInline
    internal var units: [DemandUnit]

    @usableFromInline
    internal init(_ units: [DemandUnit]) {
        self.units = units
    }

    deinit {
        releaseDownstream()
    }

    @usableFromInline
    override internal func detachDownstream(to nodes: inout ReleaseStack) {
        if units.count > 1 {
            nodes.reserve(units.count)
        }
        for unit in units {
            nodes.push(unit.hub)
        }
        units = []
    }
}
