@testable import EventLoop
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Makes `stream` echo everything back, half-closing its write side after the peer's
/// EOF once the echoes are written, and closing on a read error.
func echo(_ stream: Stream, _ harness: LoopHarness) {
    harness.attempt("server startReading") {
        try stream.startReading { event in
            switch event {
            case .data(let bytes): stream.write(bytes)
            case .eof: stream.shutdown { _ in }
            case .error: stream.close()
            }
        }
    }
}

/// Whether anything exists at `path`.
func pathExists(_ path: String) -> Bool { access(path, F_OK) == 0 }
