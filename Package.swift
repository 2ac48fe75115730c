// swift-tools-version: 6.2
import PackageDescription

/// Settings shared by every target: Swift 6 language mode is the default for this tools version;
/// these upcoming features keep imports and existentials explicit.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

/// Settings of the test targets: `EXIT_TESTS` where Swift Testing can run a test in a child
/// process (`#expect(processExitsWith:)`); iOS, tvOS, watchOS and visionOS cannot.
let testSwiftSettings = swiftSettings + [.define("EXIT_TESTS", .when(platforms: [.macOS, .linux, .windows]))]

let package = Package(
    name: "Deferred",
    // `Synchronization` (the atomics of the core) needs these releases on Apple platforms.
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "Deferred", targets: ["Deferred"]),
        .library(name: "DeferredExecutors", targets: ["DeferredExecutors"]),
        // For test targets: a Swift Testing trait that fails a test which leaves futures pending.
        .library(name: "DeferredTesting", targets: ["DeferredTesting"]),
        .executable(name: "deferred-demo", targets: ["DeferredDemo"]),
    ],
    targets: [
        .target(name: "Deferred", swiftSettings: swiftSettings),
        .target(name: "DeferredExecutors", dependencies: ["Deferred"], swiftSettings: swiftSettings),
        .target(name: "DeferredTesting", dependencies: ["Deferred"], swiftSettings: swiftSettings),
        .executableTarget(
            name: "DeferredDemo",
            dependencies: ["Deferred", "DeferredExecutors"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TestSupport",
            dependencies: ["Deferred", "DeferredExecutors"],
            path: "Tests/Support",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "DeferredTests",
            dependencies: ["Deferred", "DeferredExecutors", "DeferredTesting", "TestSupport"],
            swiftSettings: testSwiftSettings
        ),
        .testTarget(
            name: "DeferredExecutorsTests",
            dependencies: ["DeferredExecutors", "TestSupport"],
            swiftSettings: testSwiftSettings
        ),
        // The reliability suite: races, random graphs, resources and misuse. Its sizes, like every
        // test's, come from DEFERRED_TEST_SIZE (Tests/Support/TestSize.swift), so CI can run it
        // at full size in release mode.
        .testTarget(
            name: "DeferredStressTests",
            dependencies: ["Deferred", "DeferredExecutors", "TestSupport"],
            swiftSettings: testSwiftSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
