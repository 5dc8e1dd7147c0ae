import Foundation
import HTTPEngine
import JSONRPC
import Testing
import TestSupport
@testable import Service

/// `DownloadFile` alone, on a real temporary folder: the confinement of the paths it
/// creates, the modes, and what a response head means for the part file.
@Suite struct DownloadFileTests {
    private func root(_ directory: String) -> FileRoot { FileRoot(purpose: .download, directory: directory, subfolder: nil) }

    private func reason(_ path: String, _ root: String) -> String? {
        do {
            _ = try DownloadFile.open(path, root: self.root(root), resume: false)
        } catch {
            return error.reason
        }
        return nil
    }

    @Test func refusesEscapesBeforeCreatingAnything() throws {
        let root = try makeTemporaryDirectory()
        let outside = try makeTemporaryDirectory()
        defer {
            try? FileManager.default.removeItem(atPath: root)
            try? FileManager.default.removeItem(atPath: outside)
        }
        try FileManager.default.createSymbolicLink(atPath: root + "/out", withDestinationPath: outside)
        try FileManager.default.createSymbolicLink(atPath: root + "/name", withDestinationPath: outside + "/x")
        for path in ["../x", "a/../../x", outside + "/x", "out/x", "out/new/x", "name"] {
            #expect(reason(path, root) == "path_not_allowed", "\(path)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside) == [])
        #expect(try FileManager.default.contentsOfDirectory(atPath: root).sorted() == ["name", "out"])
    }

    @Test func createsFoldersAndThePartOwnerOnly() throws {
        let root = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let file = try DownloadFile.open("a/b/f.bin", root: self.root(root), resume: false)
        defer { file.close() }
        func mode(_ p: String) throws -> Int {
            (try FileManager.default.attributesOfItem(atPath: root + "/" + p)[.posixPermissions] as? Int) ?? -1
        }
        #expect(try mode("a") == 0o700)
        #expect(try mode("a/b") == 0o700)
        #expect(try mode("a/b/f.bin.part") == 0o600)
        #expect(file.headArrived(status: 200, headers: [("Content-Length", "3")], url: "u") == .write)
        let bytes: [UInt8] = [1, 2, 3]
        #expect(bytes.withUnsafeBytes { file.write($0) } == nil)
        #expect(file.place() == nil)
        #expect(FileManager.default.contents(atPath: root + "/a/b/f.bin") == Data(bytes))
    }

    @Test func aShortBodyIsNotRenamed() throws {
        let root = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let file = try DownloadFile.open("f", root: self.root(root), resume: false)
        defer { file.close() }
        #expect(file.headArrived(status: 200, headers: [("Content-Length", "10")], url: "u") == .write)
        #expect(file.incompleteness != nil)
        #expect(file.place() == nil)
        #expect(FileManager.default.fileExists(atPath: root + "/f.part"))
        #expect(!FileManager.default.fileExists(atPath: root + "/f"))
    }

    /// A folder put at the name while the body arrived: the rename fails and says so,
    /// and the part stays.
    @Test func aFailedRenameIsReported() throws {
        let root = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let file = try DownloadFile.open("f", root: self.root(root), resume: false)
        defer { file.close() }
        #expect(file.headArrived(status: 200, headers: [("Content-Length", "1")], url: "u") == .write)
        #expect([UInt8(7)].withUnsafeBytes { file.write($0) } == nil)
        try FileManager.default.createDirectory(atPath: root + "/f", withIntermediateDirectories: false)
        #expect(file.place()?.hasPrefix("Cannot move 'f.part' to 'f': ") == true)
        #expect(FileManager.default.contents(atPath: root + "/f.part") == Data([7]))
    }

    @Test func resumeAsksForTheRestAndChecksWhereTheServerResumed() throws {
        let root = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try Data([1, 2, 3, 4]).write(to: URL(fileURLWithPath: root + "/r.part"))
        try Data(#"{"etag":"\"v1\""}"#.utf8).write(to: URL(fileURLWithPath: root + "/r.part.meta"))
        let file = try DownloadFile.open("r", root: self.root(root), resume: true)
        defer { file.close() }
        #expect(file.keptBytes == 4)
        #expect(file.rangeHeaders.map(\.value) == ["bytes=4-", "\"v1\""])
        #expect(file.headArrived(status: 206, headers: [("Content-Range", "bytes 5-9/10")], url: "u")
                == .fail("The server resumed at byte 5, not at byte 4 where the part file ends"))
    }

    @Test func contentRangeForms() {
        #expect(DownloadFile.contentRange("bytes 4294967296-4294967395/4294967396")! == (4_294_967_296, 4_294_967_396))
        #expect(DownloadFile.contentRange("bytes 0-0/*")! == (0, nil))
        #expect(DownloadFile.contentRange("bytes */7")! == (nil, 7))
        #expect(DownloadFile.contentRange("bytes 5-2/7") == nil)
        #expect(DownloadFile.contentRange("items 0-1/2") == nil)
    }
}
