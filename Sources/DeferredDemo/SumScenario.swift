import Deferred
import Dispatch

/// A shop's price for one item, in cents.
struct Price: Sendable {
    let shop: String
    let cents: Int
}

/// Asks each shop for a price; each answers after its own delay.
private func askForPrices(_ shops: [(name: String, cents: Int, milliseconds: Int)]) -> [Future<Price>] {
    shops.map { shop in
        let reply = Deferred<Price>()
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(shop.milliseconds)) {
            reply.fill(with: Price(shop: shop.name, cents: shop.cents))
        }
        return Future(reply)
    }
}

func runSumScenario() {
    let clock = Clock()
    let basket = [("bread", 320, 30), ("cheese", 1_150, 10), ("apples", 480, 50), ("coffee", 899, 20)]
    let prices = askForPrices(basket.map { (name: $0.0, cents: $0.1, milliseconds: $0.2) })
    clock.log("asked \(prices.count) shops; the basket's total is not known yet")
    let screen = DispatchQueue(label: "screen")  // one serial queue prints, in order

    // Join them all: one future of every price, in the order they were asked for.
    let total = prices.allFilled().map(upon: .global()) { all in
        all.reduce(0) { $0 + $1.cents }
    }
    total.upon(screen) { clock.log("allFilled: the basket costs \(euros($0))") }

    // Or fold them two at a time: each step joins the running total with the next price.
    let folded = prices.reduce(Future(filledWith: 0)) { running, next in
        running.and(next).lazy.map { sum, price in sum + price.cents }.eraseToFuture()
    }
    for price in prices {
        price.upon(screen) { clock.log("  \($0.shop): \(euros($0.cents))") }
    }

    // A command-line program may block; an app would use upon or await instead.
    let both = total.and(folded).wait(for: .seconds(5))
    screen.sync {}  // let the screen print what it was given
    clock.log("fold agrees: \(both.map { $0.0 == $0.1 } ?? false), total \(euros(both?.1 ?? 0))")
}

private func euros(_ cents: Int) -> String {
    let remainder = cents % 100
    return "€\(cents / 100).\(remainder < 10 ? "0" : "")\(remainder)"
}
