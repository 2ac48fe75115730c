import Deferred
import Dispatch

/// A forecast for one city.
struct Forecast: Sendable {
    let city: String
    let celsius: Int
}

/// A service that answers later.
///
/// It keeps each `Deferred` private and hands out a `Future`, so callers can wait for the
/// answer but never decide it.
final class WeatherService: Sendable {
    private let network = DispatchQueue(label: "weather.network", attributes: .concurrent)
    private let temperatures = ["Oslo": 4, "Lisbon": 19, "Nairobi": 24, "Reykjavik": -2]

    /// Asks for a city's forecast; the reply arrives after a simulated network delay.
    func forecast(for city: String) -> Future<Forecast> {
        let reply = Deferred<Forecast>()
        let delay = 20 + 15 * (city.count % 4)
        network.asyncAfter(deadline: .now() + .milliseconds(delay)) { [temperatures] in
            reply.fill(with: Forecast(city: city, celsius: temperatures[city] ?? 0))
        }
        return Future(reply)
    }
}

func runServiceScenario() {
    let clock = Clock()
    let service = WeatherService()
    // Every callback names where it runs: here a serial queue stands in for the UI thread.
    let ui = DispatchQueue(label: "ui")

    let cities = ["Oslo", "Lisbon", "Nairobi", "Reykjavik"]
    let forecasts = cities.map(service.forecast(for:))
    clock.log("asked for \(cities.count) forecasts; nothing is known yet: \(forecasts[0])")

    for forecast in forecasts {
        forecast.upon(ui) { clock.log("ui: \($0.city) is \($0.celsius) °C") }
    }

    // Join them all, compute on a background queue, show the result on the UI queue.
    let warmest = forecasts.allFilled().map(upon: .global()) { all in
        all.max { $0.celsius < $1.celsius }?.city ?? "nowhere"
    }
    warmest.upon(ui) { clock.log("ui: warmest is \($0)") }

    // Join two futures of different types into a tuple.
    let summary = forecasts[0].and(warmest)
    let shown = summary.map(upon: ui) { oslo, warmest in
        clock.log("ui: Oslo \(oslo.celsius) °C while \(warmest) is warmest")
    }

    // A command-line program may block; an app would never wait like this.
    _ = shown.wait(until: .distantFuture)
    ui.sync {}
    clock.log("done: \(warmest)")
}
