import Foundation
import JSONRPC
import Testing
import TestSupport
@testable import Service

/// The one rule for the files a client names (`ConfinedPath`), and which root each
/// principal gets (`FileRoot.of`): pure, no server.
@Suite struct ConfinedPathTests {
    private let shared = FileRoot(purpose: .upload, directory: "/r", subfolder: nil, reserved: ["alice"])

    private func reason(_ path: String, _ root: FileRoot) -> String? {
        do {
            _ = try ConfinedPath.components(path, in: root)
        } catch {
            return error.reason
        }
        return nil
    }

    @Test func relativePathsWithoutDotsOrEmptyComponents() throws {
        #expect(try ConfinedPath.components("a/b.bin", in: shared) == ["a", "b.bin"])
        #expect(try ConfinedPath.components("..a/b..", in: shared) == ["..a", "b.."])
        for path in ["", "/etc/passwd", "/r/a", "..", "a/../b", "a/..", "./a", "a/./b", "a//b", "a/", "a\u{0}b",
                     String(repeating: "x", count: 246), "alice", "alice/x"] {
            #expect(reason(path, shared) == "path_not_allowed", "\(path.debugDescription)")
        }
        // Another principal's folder is reserved at the top level only.
        #expect(try ConfinedPath.components("x/alice", in: shared) == ["x", "alice"])
    }

    @Test func eachPrincipalHasItsOwnRoot() {
        var config = ServerConfig()
        config.downloadRoot = "/d"
        var alice = PrincipalConfig(name: "alice", tokenHash: nil, uid: 1, isAdmin: false, limits: PrincipalLimits())
        let bob = PrincipalConfig(name: "bob", tokenHash: nil, uid: 2, isAdmin: false, limits: PrincipalLimits())
        alice.uploadRoot = "/alices"
        config.principals = [alice, bob]
        #expect(FileRoot.of(.download, principal: "alice", config: config)
                == FileRoot(purpose: .download, directory: "/d", subfolder: "alice"))
        #expect(FileRoot.of(.download, principal: "bob", config: config)
                == FileRoot(purpose: .download, directory: "/d", subfolder: "bob"))
        #expect(FileRoot.of(.download, principal: "local", config: config)
                == FileRoot(purpose: .download, directory: "/d", subfolder: nil, reserved: ["alice", "bob"]))
        // A principal's own root wins, and its name is no folder of the shared one.
        #expect(FileRoot.of(.upload, principal: "alice", config: config)
                == FileRoot(purpose: .upload, directory: "/alices", subfolder: nil))
        #expect(FileRoot.of(.upload, principal: "bob", config: config) == nil)
        config.uploadRoot = "/u"
        #expect(FileRoot.of(.upload, principal: "local", config: config)
                == FileRoot(purpose: .upload, directory: "/u", subfolder: nil, reserved: ["bob"]))
    }

    /// On a real folder: only a regular file with one link is opened.
    @Test func onlyARegularFileWithOneLinkIsOpened() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let root = FileRoot(purpose: .upload, directory: dir, subfolder: nil)
        try Data("ok".utf8).write(to: URL(fileURLWithPath: dir + "/plain"))
        try Data("x".utf8).write(to: URL(fileURLWithPath: dir + "/twice"))
        #expect(link(dir + "/twice", dir + "/twice-too") == 0)
        #expect(mkfifo(dir + "/fifo", 0o600) == 0)
        try FileManager.default.createDirectory(atPath: dir + "/folder", withIntermediateDirectories: false)
        try FileManager.default.createSymbolicLink(atPath: dir + "/link", withDestinationPath: dir + "/plain")
        let file = try ConfinedPath.openForReading("plain", in: root)
        var st = stat()
        #expect(fstat(file.descriptor, &st) == 0 && st.st_size == 2)
        for path in ["twice", "twice-too", "fifo", "folder", "link", "link/x"] {
            do {
                _ = try ConfinedPath.openForReading(path, in: root)
                Issue.record("\(path) was opened")
            } catch {
                #expect(error.reason == "path_not_allowed", "\(path): \(error)")
            }
        }
        // What is opened is checked again, whatever was there when it was looked at
        // (a FIFO swapped in: held open for writing here, so no open can block).
        let writer = open(dir + "/fifo", O_RDWR | O_NONBLOCK)
        defer { close(writer) }
        let folder = open(dir, O_RDONLY | O_DIRECTORY)
        defer { close(folder) }
        for name in ["fifo", "twice", "link"] {
            do {
                let fd = try ConfinedPath.openRegular(name, in: folder, flags: O_RDONLY, path: name, root: root)
                close(fd)
                Issue.record("\(name) was opened")
            } catch {
                #expect(error.reason == "path_not_allowed", "\(name): \(error)")
            }
        }
        do {
            _ = try ConfinedPath.openForReading("missing", in: root)
            Issue.record("a missing file was opened")
        } catch {
            #expect(error.reason == "file_error")
        }
    }
}
