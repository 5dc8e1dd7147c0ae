@testable import EventLoop
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Whether anything exists at `path`.
func pathExists(_ path: String) -> Bool { access(path, F_OK) == 0 }
