import Deferred
import DeferredExecutors
import Dispatch
import Foundation
import Synchronization

/// Why an image did not arrive.
enum ImageError: CancellableError {
    case cancelled
}

/// A service that downloads avatars, sharing one download among every cell that shows the same one.
final class AvatarService: Sendable {
    private let clock: Clock
    private let network = DispatchQueue(label: "images.network", attributes: .concurrent)
    private let started = Atomic<Int>(0)
    /// One download per name while it runs; a finished one is kept for five seconds.
    private let downloads: SharedAttempts<String, String, ImageError>

    init(clock: Clock) {
        self.clock = clock
        downloads = SharedAttempts(keepingSuccessesFor: .seconds(5), upon: network)
    }

    /// How many downloads started.
    var downloadsStarted: Int { started.load(ordering: .relaxed) }

    /// The avatar of `name`: the download in flight, the one kept, or a new one.
    func avatar(of name: String) -> Attempt<String, ImageError> {
        downloads.attempt(for: name, start: download)
    }

    /// Downloads the avatar of `name`, about 150 ms later, unless every cell gave up on it.
    private func download(_ name: String) -> Attempt<String, ImageError> {
        started.add(1, ordering: .relaxed)
        clock.log("network: downloading \(name)'s avatar")
        return Attempt { request in
            request.onCancel { [clock] in
                clock.log("network: no cell wants \(name)'s avatar any more: download stopped")
            }
            network.asyncAfter(deadline: .now() + .milliseconds(150)) {
                request.succeed(with: "[\(name)'s picture]")
            }
        }
    }
}

/// A table row that shows one person's avatar while it is on screen.
final class AvatarCell: Sendable {
    let row: Int
    private let request: Mutex<Attempt<String, ImageError>?> = Mutex(nil)

    init(row: Int) {
        self.row = row
    }

    /// Shows `name` in this row, asking the service for the avatar.
    func show(_ name: String, from service: AvatarService, upon ui: ThreadExecutor, clock: Clock, shown: Counter) {
        let avatar = service.avatar(of: name)
        request.withLock { $0 = avatar }
        avatar.uponSuccess(ui) { [row] picture in
            clock.log("ui: row \(row) shows \(picture)")
            shown.add()
        }
    }

    /// The row scrolled off screen: its request is cancelled, and nothing reaches it any more.
    func scrolledAway(clock: Clock) {
        clock.log("ui: row \(row) scrolled away")
        request.withLock { $0.take() }?.cancel()
    }
}

/// Counts the avatars shown.
final class Counter: Sendable {
    private let count = Atomic<Int>(0)
    func add() { count.add(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}

func runSharedImagesScenario() {
    let clock = Clock()
    let service = AvatarService(clock: clock)
    let ui = ThreadExecutor(name: "ui")
    let shown = Counter()
    let people = ["alice", "bob", "alice", "carol", "alice", "bob", "alice"]
    let cells = people.indices.map(AvatarCell.init(row:))
    func appear(_ rows: Range<Int>) {
        for row in rows {
            clock.log("ui: row \(row) appears, wants \(people[row])'s avatar")
            cells[row].show(people[row], from: service, upon: ui, clock: clock, shown: shown)
        }
    }

    appear(0..<4)  // alice, bob, alice (joins), carol
    Thread.sleep(forTimeInterval: 0.02)
    // Rows 0 and 1 scroll away: alice is still wanted by row 2; bob by nobody.
    cells[0].scrolledAway(clock: clock)
    cells[1].scrolledAway(clock: clock)
    appear(4..<6)  // alice joins the download in flight; bob starts a new one
    Thread.sleep(forTimeInterval: 0.3)
    appear(6..<7)  // alice again: the finished download is kept, so nothing is downloaded
    Thread.sleep(forTimeInterval: 0.02)
    _ = ui.shutdown().wait(until: .distantFuture)
    clock.log(
        "done: \(people.count) rows asked, \(service.downloadsStarted) downloads started, \(shown.value) avatars shown; rows 0 and 1 got nothing after they scrolled away"
    )
}
