// swift-tools-version:6.0
// A cross-platform app as README shows it: it depends on OpenAVFAudio only on Linux and keeps its
// `import AVFoundation`. Scripts/test builds it against this checkout with warnings as errors, from
// a scratch directory that holds it beside a link named OpenAVFAudio to the checkout (a package's
// identity is its directory's name, and apps name it OpenAVFAudio).
import PackageDescription

let package = Package(
    name: "DependentApp",
    dependencies: [
        .package(path: "../OpenAVFAudio"),
    ],
    targets: [
        .executableTarget(
            name: "DependentApp",
            dependencies: [
                .product(name: "AVFoundation", package: "OpenAVFAudio", condition: .when(platforms: [.linux])),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
