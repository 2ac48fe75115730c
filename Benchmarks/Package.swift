// swift-tools-version: 6.2
import PackageDescription

// Benchmarks for Deferred, next to its peers, in one process. A separate package so that the
// library itself keeps zero dependencies.
//
// - `swift run -c release deferred-bench` prints the comparison table (time and allocations
//   per operation); `--quick` runs a small size, `--counts` adds instructions and atomic
//   read-modify-writes per operation from callgrind (`Scripts/callgrind-counts`), `--check`
//   enforces the budgets.
// - `swift package --disable-sandbox benchmark` runs the same scenarios under
//   ordo-one/benchmark, with its malloc and latency metrics.

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "DeferredBenchmarks",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .executable(name: "deferred-bench", targets: ["DeferredBench"]),
    ],
    dependencies: [
        .package(name: "Deferred", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/ordo-one/malloc-interposer", from: "1.6.1"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/OpenCombine/OpenCombine", from: "0.14.0"),
    ],
    targets: [
        .target(
            name: "BenchmarkScenarios",
            dependencies: [
                .product(name: "Deferred", package: "Deferred"),
                .product(name: "DeferredExecutors", package: "Deferred"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "OpenCombine", package: "OpenCombine"),
                .product(name: "OpenCombineDispatch", package: "OpenCombine"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "DeferredBench",
            dependencies: [
                "BenchmarkScenarios",
                .product(name: "Deferred", package: "Deferred"),
                .product(name: "DeferredExecutors", package: "Deferred"),
                .product(name: "MallocInterposerSwift", package: "malloc-interposer"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "DeferredBenchmarks",
            dependencies: [
                "BenchmarkScenarios",
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/DeferredBenchmarks",
            swiftSettings: swiftSettings,
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
