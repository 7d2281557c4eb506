"""Policy checkpoints: round trip, weights-only loading, and one clear error for every bad file."""

from __future__ import annotations

import errno
import os
import pickle
import zipfile

import pytest
import torch

from gnplace.exceptions import InvalidCheckpoint
from gnplace.policy import checkpoint as ckpt
from gnplace.policy.checkpoint import feature_set, load_policy, read_checkpoint, save_policy
from gnplace.policy.gnn import PlacementPolicy, PolicyConfig


@pytest.fixture
def saved(tmp_path):
    torch.manual_seed(3)
    policy = PlacementPolicy(PolicyConfig(hidden=16, layers=2, head=8))
    path = save_policy(tmp_path / "p.ckpt", policy, {"iterations": 5, "note": "test"})
    return policy, path


def test_round_trip_keeps_weights_shape_and_meta(saved):
    policy, path = saved
    loaded, meta = load_policy(path)
    assert meta == {"iterations": 5, "note": "test"}
    assert loaded.config == policy.config and not loaded.training
    for (name, a), (_, b) in zip(policy.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), name


def test_the_file_holds_plain_data_only_and_is_an_ordinary_file(saved):
    _, path = saved
    data = torch.load(path, weights_only=True)
    assert data["format"] == "gnplace-policy" and data["features"] == feature_set()
    umask = os.umask(0)
    os.umask(umask)
    assert (path.stat().st_mode & 0o777) == (0o666 & ~umask)


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_a_damaged_file_is_one_clear_error(saved, tmp_path, damage):
    _, path = saved
    bad = tmp_path / "bad.ckpt"
    raw = path.read_bytes()
    bad.write_bytes({"truncated": raw[: len(raw) // 2], "garbage": os.urandom(4096), "empty": b""}[damage])
    with pytest.raises(InvalidCheckpoint, match="not a readable checkpoint") as err:
        load_policy(bad)
    assert "\n" not in str(err.value)


def test_a_flipped_byte_in_the_weights_is_refused_as_corrupt(saved, tmp_path):
    # torch.load itself would load this file: it does not check the CRC-32 that torch.save recorded
    _, path = saved
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        entry = next(i for i in archive.infolist() if "/data/" in i.filename and i.file_size >= 64)
    start = entry.header_offset + 30 + len(entry.filename.encode()) + int.from_bytes(
        raw[entry.header_offset + 28: entry.header_offset + 30], "little")
    raw[start + 17] ^= 0x04
    bad = tmp_path / "flipped.ckpt"
    bad.write_bytes(bytes(raw))
    torch.load(bad, weights_only=True)
    with pytest.raises(InvalidCheckpoint, match=f"corrupt checkpoint .*{entry.filename}.* CRC-32") as err:
        load_policy(bad)
    assert "\n" not in str(err.value)


def test_a_device_is_not_a_missing_checkpoint(tmp_path):
    fifo = tmp_path / "pipe.ckpt"
    os.mkfifo(fifo)
    with pytest.raises(InvalidCheckpoint, match="not a regular file"):
        read_checkpoint(fifo)
    with pytest.raises(InvalidCheckpoint, match="no such checkpoint file"):
        read_checkpoint(tmp_path / "absent.ckpt")


class _Evil:
    def __reduce__(self):
        return (print, ("code ran",))


def test_pickled_code_is_refused_not_run(tmp_path, capsys):
    path = tmp_path / "evil.ckpt"
    with open(path, "wb") as f:
        pickle.dump({"format": "gnplace-policy", "x": _Evil()}, f, protocol=2)
    with pytest.raises(InvalidCheckpoint):
        load_policy(path)
    assert "code ran" not in capsys.readouterr().out


def test_another_of_gnplaces_checkpoints_is_named_by_its_format(tmp_path):
    """A Placeto checkpoint given as the policy's (``scripts/place.py --checkpoint placeto.pt``) was "not a gnplace
    checkpoint (no policy weights in it)", where ``gnplace place -p policy`` named it a 'gnplace-placeto' one."""
    from gnplace.policy.placeto_gnn import PlacetoConfig
    from gnplace.rl.placeto import PlacetoModel, _network, save_placeto

    path = save_placeto(PlacetoModel(_network(PlacetoConfig(num_devices=2, hidden=8, rounds=2), 0), {}),
                        tmp_path / "placeto.pt")
    with pytest.raises(InvalidCheckpoint) as refused:
        load_policy(path)
    assert str(refused.value) == (f"{path}: a 'gnplace-placeto' checkpoint, not a policy one ('gnplace-policy', or a "
                                  "training run's last.ckpt)")


def test_foreign_missing_and_mismatched_checkpoints(saved, tmp_path):
    _, path = saved
    foreign = tmp_path / "foreign.ckpt"
    torch.save({"model": {"w": torch.zeros(2)}}, foreign)
    with pytest.raises(InvalidCheckpoint, match="not a gnplace checkpoint"):
        load_policy(foreign)
    with pytest.raises(InvalidCheckpoint, match="no such checkpoint"):
        load_policy(tmp_path / "nope.ckpt")
    data = torch.load(path, weights_only=True)
    data["features"]["node"] = data["features"]["node"][:-1]
    torch.save(data, tmp_path / "other_features.ckpt")
    with pytest.raises(InvalidCheckpoint, match="other policy features"):
        load_policy(tmp_path / "other_features.ckpt")
    data = torch.load(path, weights_only=True)
    data["policy"]["hidden"] = 32
    torch.save(data, tmp_path / "other_shape.ckpt")
    with pytest.raises(InvalidCheckpoint, match="do not fit"):
        load_policy(tmp_path / "other_shape.ckpt")
    for bad in (-5, "abc", 0):  # a shape no network has: refused before any tensor is made
        data["policy"]["hidden"] = bad
        torch.save(data, tmp_path / "bad_shape.ckpt")
        with pytest.raises(InvalidCheckpoint, match=r"shape is malformed \(the policy's hidden must be an int >= 1"):
            load_policy(tmp_path / "bad_shape.ckpt")
    data["policy"]["hidden"] = 10**6  # a network of terabytes: refused before any tensor is allocated
    torch.save(data, tmp_path / "huge_shape.ckpt")
    with pytest.raises(InvalidCheckpoint, match=r"shape is malformed \(the policy's hidden must be at most 8192"):
        load_policy(tmp_path / "huge_shape.ckpt")
    assert isinstance(read_checkpoint(path), dict)


def test_incomplete_and_non_finite_checkpoints_are_refused(saved, tmp_path):
    _, path = saved
    torch.save({"format": "gnplace-policy", "version": torch.load(path, weights_only=True)["version"]},
               tmp_path / "bare.ckpt")
    with pytest.raises(InvalidCheckpoint, match="incomplete gnplace policy checkpoint"):
        load_policy(tmp_path / "bare.ckpt")
    data = torch.load(path, weights_only=True)
    name = next(k for k, v in data["state_dict"].items() if v.is_floating_point())
    data["state_dict"][name] = torch.full_like(data["state_dict"][name], float("nan"))
    torch.save(data, tmp_path / "nan.ckpt")
    with pytest.raises(InvalidCheckpoint, match=rf"not finite \(NaN or infinity in {name}\)"):
        load_policy(tmp_path / "nan.ckpt")



def _edited(path, tmp_path, name, edit):
    data = torch.load(path, weights_only=True)
    edit(data)
    torch.save(data, tmp_path / name)
    return tmp_path / name


def _edit_dynamic(data, count):
    data["policy"]["dynamic_features"] = count
    data["state_dict"]["dynamic_proj.weight"] = data["state_dict"]["dynamic_proj.weight"][:, :count]


@pytest.mark.parametrize("name, edit, message", [
    # a consistent network of another dynamic feature count: loaded, then a numpy traceback when placing
    ("dynamic.ckpt", lambda d: _edit_dynamic(d, 5), "5 dynamic features; this gnplace computes 9"),
    ("alpha.ckpt", lambda d: d["policy"].__setitem__("alpha", 0.0), "alpha must be a finite number > 0"),  # math error
    ("alpha_big.ckpt", lambda d: d["policy"].__setitem__("alpha", 10**400), "alpha must be a finite number > 0"),
    ("key.ckpt", lambda d: d["state_dict"].__setitem__(3, torch.zeros(1)), "weights are missing or malformed"),
    ("sparse.ckpt", lambda d: d["state_dict"].__setitem__("out.bias", torch.zeros(1).to_sparse()),
     "weights are missing or malformed"),  # was torch's NotImplementedError
    ("complex.ckpt", lambda d: d["state_dict"].__setitem__("out.bias", torch.ones(1, dtype=torch.complex64)),
     "weights are missing or malformed"),  # was loaded, its imaginary part dropped
    ("meta.ckpt", lambda d: d["state_dict"].__setitem__("out.bias", torch.zeros(1, device="meta")),
     "weights are missing or malformed"),  # no data: was a RuntimeError from Tensor.item()
    ("version.ckpt", lambda d: d.__setitem__("version", 2), r"checkpoint version 2; this gnplace reads 1$"),
])
def test_an_edited_checkpoint_is_one_clear_error(saved, tmp_path, name, edit, message):
    _, path = saved
    with pytest.raises(InvalidCheckpoint, match=message):
        load_policy(_edited(path, tmp_path, name, edit))


def test_a_training_checkpoint_with_odd_keys_or_shape_is_one_clear_error(saved, tmp_path):
    policy, _ = saved
    weights = {f"policy.{k}": v for k, v in policy.state_dict().items()}
    torch.save({"state_dict": {**weights, 7: torch.zeros(1)}, "gnplace": {}, "hyper_parameters": {
        "hidden": 16, "layers": 2, "head": 8}}, tmp_path / "last.ckpt")
    assert load_policy(tmp_path / "last.ckpt")[0].config == policy.config  # was AttributeError on the int key
    weights["policy.dynamic_proj.weight"] = weights["policy.dynamic_proj.weight"][:, :4]
    torch.save({"state_dict": weights, "gnplace": {}, "hyper_parameters": {
        "hidden": 16, "layers": 2, "head": 8, "dynamic_features": 4}}, tmp_path / "last.ckpt")
    with pytest.raises(InvalidCheckpoint, match="4 dynamic features"):
        load_policy(tmp_path / "last.ckpt")


def test_a_training_checkpoint_made_for_other_features_is_refused(saved, tmp_path):
    policy, _ = saved
    weights = {f"policy.{k}": v for k, v in policy.state_dict().items()}
    shape = {"hidden": 16, "layers": 2, "head": 8}
    torch.save({"state_dict": weights, "gnplace": {"features": feature_set()}, "hyper_parameters": shape},
               tmp_path / "same.ckpt")
    assert load_policy(tmp_path / "same.ckpt")[0].config == policy.config
    other = {**feature_set(), "node": feature_set()["node"][:-1]}
    torch.save({"state_dict": weights, "gnplace": {"features": other}, "hyper_parameters": shape},
               tmp_path / "other.ckpt")
    with pytest.raises(InvalidCheckpoint, match=r"made for other policy features; retrain with this gnplace version$"):
        load_policy(tmp_path / "other.ckpt")

def test_resumed_weights_that_are_not_finite_or_not_the_policys_are_refused(saved, tmp_path):
    """``check_training_weights``: the config's policy's weights, finite, and no other ``policy.`` weight."""
    policy, _ = saved
    weights = {f"policy.{k}": v.clone() for k, v in policy.state_dict().items()}
    ckpt.check_training_weights(tmp_path / "last.ckpt", weights, policy.config, "the config's policy")
    name = next(k for k, v in weights.items() if v.is_floating_point() and v.dim() == 2)
    broken = {**weights, name: torch.full_like(weights[name], float("inf"))}
    with pytest.raises(InvalidCheckpoint, match=rf"{name} holds non-finite weights \(a run that diverged\)"):
        ckpt.check_training_weights(tmp_path / "last.ckpt", broken, policy.config, "the config's policy")
    with pytest.raises(InvalidCheckpoint, match=r"\(policy.extra is not one of its weights\); cannot resume"):
        ckpt.check_training_weights(tmp_path / "last.ckpt", {**weights, "policy.extra": torch.zeros(1)},
                                    policy.config, "the config's policy")


def test_a_failed_write_leaves_the_old_checkpoint_whole(saved, monkeypatch):
    policy, path = saved
    before = path.read_bytes()

    def broken(obj, handle):
        handle.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(ckpt.torch, "save", broken)
    with pytest.raises(OSError):
        save_policy(path, policy)
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left behind


class _FillsUp:
    """A file that takes ``room`` bytes, then fails each write as a full disk does."""

    def __init__(self, handle, room):
        self.handle, self.room = handle, room

    def write(self, data):
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(data)
        return self.handle.write(data)

    def flush(self):
        self.handle.flush()


@pytest.mark.parametrize("room", [0, 1000])  # 1000: torch's archive writer raised RuntimeError("unexpected pos")
def test_a_disk_that_fills_up_mid_checkpoint_names_the_file_and_keeps_the_old_one(saved, monkeypatch, room):
    policy, path = saved
    before = path.read_bytes()
    save = torch.save
    monkeypatch.setattr(ckpt.torch, "save", lambda obj, handle: save(obj, _FillsUp(handle, room)))
    with pytest.raises(OSError) as caught:
        save_policy(path, policy)
    assert (caught.value.errno, caught.value.strerror, caught.value.filename) == (
        errno.ENOSPC, "No space left on device", str(path))
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def _edit_zip_headers(raw, central_offset, local_offset, value, size=1, combine=lambda old, new: new):
    """``raw`` with a field of every central (``PK\\x01\\x02``) and local (``PK\\x03\\x04``) zip header set."""
    raw = bytearray(raw)
    for signature, offset in ((b"PK\x01\x02", central_offset), (b"PK\x03\x04", local_offset)):
        at = raw.find(signature)
        while at >= 0:
            old = int.from_bytes(raw[at + offset: at + offset + size], "little")
            raw[at + offset: at + offset + size] = combine(old, value).to_bytes(size, "little")
            at = raw.find(signature, at + 4)
    return bytes(raw)


@pytest.mark.parametrize("edit", [
    # the general-purpose flag's "encrypted" bit: zipfile raised RuntimeError ("password required"), a traceback
    dict(central_offset=8, local_offset=6, value=1, combine=lambda old, new: old | new),
    # stored entries relabelled as deflated: zipfile raised zlib.error ("invalid stored block lengths")
    dict(central_offset=10, local_offset=8, value=8, size=2),
])
def test_an_entry_zipfile_cannot_read_is_one_clear_error(saved, tmp_path, edit):
    _, path = saved
    bad = tmp_path / "edited.ckpt"
    bad.write_bytes(_edit_zip_headers(path.read_bytes(), **edit))
    with pytest.raises(InvalidCheckpoint, match="corrupt checkpoint") as err:
        load_policy(bad)
    assert "\n" not in str(err.value)


def test_an_eft_weight_that_overflows_is_refused(saved, tmp_path):
    # log_alpha = 100 is finite, but exp(100) is infinite in float32: every logit of the best device was NaN
    _, path = saved
    bad = _edited(path, tmp_path, "alpha_overflow.ckpt", lambda d: d["state_dict"].__setitem__(
        "log_alpha", torch.tensor(100.0)))
    with pytest.raises(InvalidCheckpoint, match="log_alpha"):
        load_policy(bad)


def test_a_feature_list_only_the_checkpoint_has_is_named(saved, tmp_path):
    # an extra kind of feature in the file was reported as "all differ" although node, edge, ... all matched
    _, path = saved
    bad = _edited(path, tmp_path, "extra_kind.ckpt", lambda d: d["features"].__setitem__("graph", ["log_ops"]))
    with pytest.raises(InvalidCheckpoint, match=r"other policy features \(graph differ\)"):
        load_policy(bad)


@pytest.mark.parametrize(("entries", "held"), [(["notes.txt"], "1 entry 'notes.txt'"),
                                               (["mydata.pkl"], "1 entry 'mydata.pkl'"),  # not named data.pkl
                                               (["a.txt", "b.txt"], "2 entries such as 'a.txt'")])
def test_a_zip_archive_of_something_else_is_named_as_one(tmp_path, entries, held):
    """torch's own message was ``[enforce fail at inline_container.cc:180]``, which says nothing of the file; one
    entry was "1 entries such as"."""
    path = tmp_path / "notes.ckpt"
    with zipfile.ZipFile(path, "w") as archive:
        for entry in entries:
            archive.writestr(entry, "not weights")
    with pytest.raises(InvalidCheckpoint, match=r"notes.ckpt: a zip archive, not a torch checkpoint \(it holds no "
                                                rf"data.pkl; {held}\)$"):
        read_checkpoint(path)


@pytest.mark.parametrize(
    "edit, problem",
    [
        (lambda state: state.pop("log_alpha"), "missing log_alpha"),
        (lambda state: state.update(extra=torch.zeros(2)), "unexpected extra"),
        (lambda state: state.clear(), r"missing log_alpha, [\w.]+, [\w.]+ and \d+ more"),
        (lambda state: state.update(log_alpha=torch.zeros(3)), r"log_alpha has shape \[3\], the policy needs \[\]"),
    ],
    ids=["missing", "extra", "none", "shape"],
)
def test_weights_that_do_not_fit_name_the_weights(saved, tmp_path, edit, problem):
    """The message was torch's first line alone, ``Error(s) in loading state_dict for PlacementPolicy:``."""
    _, path = saved
    data = torch.load(path, weights_only=True)
    edit(data["state_dict"])
    torch.save(data, tmp_path / "edited.ckpt")
    with pytest.raises(InvalidCheckpoint, match=rf"the weights do not fit the policy's shape \({problem}\)$"):
        load_policy(tmp_path / "edited.ckpt")


def test_a_checkpoint_in_torchs_legacy_format_is_refused(saved, tmp_path):
    """The legacy (non-zip) format has no CRC-32: a flipped byte in it loaded as other weights."""
    policy, _ = saved
    legacy = tmp_path / "legacy.ckpt"
    torch.save({"format": "gnplace-policy", "state_dict": policy.state_dict()}, legacy,
               _use_new_zipfile_serialization=False)
    with pytest.raises(InvalidCheckpoint, match=r"not a readable checkpoint \(truncated, corrupt or unsafe: not a zip "
                                                r"archive; gnplace reads torch's zip format"):
        read_checkpoint(legacy)


def test_loading_a_policy_leaves_the_callers_torch_stream_alone(saved):
    """Building the network to load into drew its initialisation from torch's global generator: the first
    ``get_placer("policy")`` of a process changed what the caller's next ``torch.rand`` gave."""
    original, path = saved
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    policy, _ = load_policy(path)
    assert torch.equal(torch.rand(3), expected)
    assert all(torch.equal(a, b) for a, b in zip(policy.state_dict().values(), original.state_dict().values(),
                                                 strict=True))


def test_a_checkpoint_name_of_255_bytes_is_written(tmp_path):
    """The temporary file beside it (``.NAME.RANDOM``) passed the 255 bytes a file name holds."""
    from gnplace.policy.checkpoint import atomic_torch_save

    path = tmp_path / ("c" * 250 + ".ckpt")
    atomic_torch_save({"step": 1}, path)
    assert [entry.name for entry in tmp_path.iterdir()] == [path.name]
    assert torch.load(path, weights_only=True) == {"step": 1}


def test_one_predicate_tells_a_training_runs_checkpoint():
    """load_policy, the CLI's --checkpoint format and both resumes (pretraining, a search) wrote the same test of a
    training run's Lightning checkpoint four times; they share ``is_training_checkpoint``."""
    import inspect

    import gnplace.cli.common
    import gnplace.pretrain_resume
    import gnplace.rl.search
    from gnplace.policy import checkpoint
    from gnplace.policy.checkpoint import FORMAT, is_training_checkpoint

    assert is_training_checkpoint({"state_dict": {}, "gnplace": {"iteration": 3}})
    assert not is_training_checkpoint({"format": FORMAT, "state_dict": {}, "meta": {}})
    assert not is_training_checkpoint({"state_dict": [], "gnplace": {}})
    assert not is_training_checkpoint({"state_dict": {}, "gnplace": None})
    for module in (checkpoint, gnplace.cli.common, gnplace.pretrain_resume, gnplace.rl.search):
        source = inspect.getsource(module)
        assert source.count('isinstance(data.get("gnplace"), dict)') == (module is checkpoint), module.__name__


def test_a_shape_its_weights_do_not_fit_is_refused_before_a_policy_of_it_is_allocated(saved, tmp_path, monkeypatch):
    """hidden: 8192, layers: 64 in a 300 KB file was a policy of 48.5 GiB built before its weights were compared."""
    policy, path = saved
    data = torch.load(path, weights_only=True)
    data["policy"].update(hidden=1024, layers=8)  # 25 million weights; the file holds those of hidden 16, 2 layers
    torch.save(data, tmp_path / "huge.ckpt")
    built = []

    class Recorded(PlacementPolicy):
        def __init__(self, config):
            super().__init__(config)
            built.append((config.hidden, next(self.parameters()).device.type))

    monkeypatch.setattr(ckpt, "PlacementPolicy", Recorded)
    with pytest.raises(InvalidCheckpoint, match=r"huge.ckpt: the weights do not fit the policy's shape \(missing "
                                                r"encoder.self_lin.2.weight, .*encoder.lift.0.weight has shape "
                                                r"\[16, \d+\], the policy needs \[1024, \d+\]\)$"):
        load_policy(tmp_path / "huge.ckpt")
    assert built == [(1024, "meta")]  # shapes only: nothing of that size was allocated
    assert load_policy(path)[0].config == policy.config


def test_a_checkpoint_whose_entries_unpack_past_its_size_is_refused_unread(saved, tmp_path):
    """Deflated zeros: torch.load allocates each entry's unpacked size (1 MB of file was a 1 GiB tensor)."""
    policy, _ = saved
    save_policy(tmp_path / "plain.ckpt", policy, {"padding": torch.zeros(2**22)})  # 16 MiB of zeros
    with zipfile.ZipFile(tmp_path / "plain.ckpt") as plain, \
            zipfile.ZipFile(tmp_path / "packed.ckpt", "w", compression=zipfile.ZIP_DEFLATED) as packed:
        for entry in plain.infolist():
            packed.writestr(entry.filename, plain.read(entry.filename))
    size = (tmp_path / "packed.ckpt").stat().st_size
    assert size < 2**20
    with pytest.raises(InvalidCheckpoint, match=rf"packed.ckpt: its entries unpack to \d+ bytes, more than the "
                                                rf"file's {size}: not a checkpoint torch wrote \(it stores them "
                                                r"uncompressed\); refused unread$"):
        read_checkpoint(tmp_path / "packed.ckpt")
    assert read_checkpoint(tmp_path / "plain.ckpt")["meta"]["padding"].shape == (2**22,)


def test_a_checkpoint_write_killed_before_its_rename_leaves_nothing_the_next_write_keeps(tmp_path):
    """``kill -9`` in the middle of an interval's ``last.ckpt`` left its temporary file (``.last.ckpt.RANDOM``)
    beside it, never removed: another one a kill. It is named as write_atomically's now, and removed as theirs are."""
    import subprocess
    import sys
    import time

    from gnplace.graph_io import STALE_TEMPORARY_S
    from gnplace.policy.checkpoint import atomic_torch_save

    path = tmp_path / "last.ckpt"
    killed = ("import os, signal, sys\n"
              "from gnplace.policy.checkpoint import atomic_torch_save\n"
              "os.replace = lambda *args: os.kill(os.getpid(), signal.SIGKILL)  # killed as it renames\n"
              "atomic_torch_save({'step': 2}, sys.argv[1])\n")
    assert subprocess.run([sys.executable, "-c", killed, str(path)]).returncode == -9
    left = [entry for entry in tmp_path.iterdir()]
    assert len(left) == 1 and not path.exists()  # the killed write's temporary file alone
    old = time.time() - STALE_TEMPORARY_S - 60  # as old as no write of another host's same process id is
    os.utime(left[0], (old, old))
    atomic_torch_save({"step": 3}, path)
    assert [entry.name for entry in tmp_path.iterdir()] == ["last.ckpt"]
    assert torch.load(path, weights_only=True) == {"step": 3}


def test_a_checkpoint_written_over_keeps_its_permissions(tmp_path):
    """A ``last.ckpt`` made private (chmod 600) was 644 again after the next interval's save (the rename brought
    the temporary file's umask permissions)."""
    import os
    import stat

    from gnplace.policy.checkpoint import atomic_torch_save

    path = atomic_torch_save({"step": 1}, tmp_path / "last.ckpt")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask  # a new file: the umask's
    for mode in (0o600, 0o640, 0o444):
        path.chmod(mode)
        atomic_torch_save({"step": 2}, path)
        assert stat.S_IMODE(path.stat().st_mode) == mode


def test_a_loop_template_this_lightning_cannot_build_leaves_the_loop_to_lightnings_own_checks(monkeypatch):
    """The template is a fit loop made without a trainer (Lightning 2.6 builds one from its arguments alone); a later
    Lightning whose loop needs its trainer must not make every resume a traceback."""
    import lightning.pytorch.loops as loops

    from gnplace.policy.checkpoint import _damaged_loop_section

    damaged = {"epoch_progress": {"current": {"ready": "x"}}}
    assert _damaged_loop_section(damaged) == "epoch_progress"

    def needs_a_trainer(trainer, **kwargs):  # noqa: ANN001, ANN003, ANN202
        return trainer.max_steps

    monkeypatch.setattr(loops, "_FitLoop", needs_a_trainer)
    assert _damaged_loop_section(damaged) is None


def test_a_temporary_name_another_write_holds_is_left_to_it(tmp_path, monkeypatch):
    """The temporary file is made with O_EXCL: where its name is taken (another write's), that file is neither
    written over nor removed, and the write fails naming the destination."""
    from gnplace.policy.checkpoint import atomic_torch_save

    monkeypatch.setattr(ckpt.os, "urandom", lambda n: b"\0" * n)
    path = tmp_path / "last.ckpt"
    theirs = tmp_path / f"last.ckpt.{os.getpid()}.00000000.tmp"
    theirs.write_bytes(b"another write's")
    with pytest.raises(OSError) as caught:
        atomic_torch_save({"step": 1}, path)
    assert (caught.value.errno, caught.value.filename) == (errno.EEXIST, str(path))
    assert theirs.read_bytes() == b"another write's" and not path.exists()


def test_a_failed_write_through_a_link_names_the_link(saved, tmp_path, monkeypatch):
    """A link is written through (its target replaced); the error names the path the caller gave."""
    policy, path = saved
    link = tmp_path / "link.ckpt"
    link.symlink_to(path)
    before = path.read_bytes()
    save = torch.save
    monkeypatch.setattr(ckpt.torch, "save", lambda obj, handle: save(obj, _FillsUp(handle, 0)))
    with pytest.raises(OSError) as caught:
        save_policy(link, policy)
    assert caught.value.filename == str(link)
    assert link.is_symlink() and path.read_bytes() == before


def test_a_checkpoint_is_written_into_a_folder_not_made_yet(saved, tmp_path):
    policy, _ = saved
    written = save_policy(tmp_path / "a" / "b" / "p.ckpt", policy, {"n": 1})
    assert written == tmp_path / "a" / "b" / "p.ckpt" and load_policy(written)[1] == {"n": 1}


def test_a_checkpoint_over_the_size_limit_is_refused_and_one_at_it_read(saved, monkeypatch):
    import gnplace.limits

    _, path = saved
    size = path.stat().st_size
    monkeypatch.setattr(gnplace.limits, "MAX_FILE_BYTES", size - 1)
    with pytest.raises(InvalidCheckpoint, match=rf"p.ckpt: {size} bytes is over the limit of {size - 1} for a "
                                                r"checkpoint$"):
        read_checkpoint(path)
    monkeypatch.setattr(gnplace.limits, "MAX_FILE_BYTES", size)
    assert read_checkpoint(path)["format"] == "gnplace-policy"


def test_a_policy_file_without_weights_is_incomplete(saved, tmp_path):
    _, path = saved
    bad = _edited(path, tmp_path, "no_weights.ckpt", lambda d: d.pop("state_dict"))
    with pytest.raises(InvalidCheckpoint, match=r"an incomplete gnplace policy checkpoint \(no feature list or "
                                                r"weights\)$"):
        load_policy(bad)


@pytest.mark.parametrize("shape, message", [
    (None, "the policy's shape is missing"), ([16, 2, 8], "the policy's shape is missing"),
])
def test_a_policy_file_without_its_shape_is_refused(saved, tmp_path, shape, message):
    _, path = saved
    bad = _edited(path, tmp_path, "no_shape.ckpt", lambda d: d.__setitem__("policy", shape))
    with pytest.raises(InvalidCheckpoint, match=rf"no_shape.ckpt: {message}$"):
        load_policy(bad)


def test_a_policy_files_meta_that_is_no_mapping_reads_as_none(saved, tmp_path):
    _, path = saved
    assert load_policy(_edited(path, tmp_path, "meta.ckpt", lambda d: d.__setitem__("meta", [1, 2])))[1] == {}


def test_a_training_checkpoints_meta_says_how_the_run_was_trained(saved, tmp_path):
    """The iteration, the learner's hyperparameters (those that are no shape skipped for the network) and the
    problem's settings; a pretraining run's own recorded config instead where its exporter kept one."""
    policy, _ = saved
    weights = {f"policy.{k}": v for k, v in policy.state_dict().items()}
    hyper = {"hidden": 16, "layers": 2, "head": 8, "lr": 0.001, "prior": 2.0}
    data = {"state_dict": weights, "gnplace": {"iteration": 7}, "hyper_parameters": hyper,
            "gnplace_run": {"settings": {"modules": 1, "anchor": True}}}
    torch.save(data, tmp_path / "search.ckpt")
    loaded, meta = load_policy(tmp_path / "search.ckpt")
    assert loaded.config == policy.config
    assert meta == {"source": "training checkpoint", "iteration": 7,
                    "config": {"learner": hyper, "data": {"modules": False, "anchored": True}}}
    data["callbacks"] = {"Other": {"x": 1}, "ExportPolicy": {"config": {"learner": {"prior": 3.0}}, "elapsed": 1.0}}
    torch.save(data, tmp_path / "pretrain.ckpt")
    assert load_policy(tmp_path / "pretrain.ckpt")[1]["config"] == {"learner": {"prior": 3.0}}


def test_a_training_checkpoints_empty_feature_list_is_not_this_gnplaces(saved, tmp_path):
    policy, _ = saved
    weights = {f"policy.{k}": v for k, v in policy.state_dict().items()}
    torch.save({"state_dict": weights, "gnplace": {"features": {}}, "hyper_parameters": {
        "hidden": 16, "layers": 2, "head": 8}}, tmp_path / "last.ckpt")
    with pytest.raises(InvalidCheckpoint, match="made for other policy features"):
        load_policy(tmp_path / "last.ckpt")


def test_three_missing_weights_are_named_without_a_count_and_only_the_first_shape(saved, tmp_path):
    _, path = saved
    names = list(torch.load(path, weights_only=True)["state_dict"])
    bad = _edited(path, tmp_path, "three.ckpt", lambda d: [d["state_dict"].pop(name) for name in names[:3]])
    with pytest.raises(InvalidCheckpoint, match=rf"\(missing {names[0]}, {names[1]}, {names[2]}\)$"):
        load_policy(bad)
    shapes = {name: list(tensor.shape) for name, tensor in torch.load(path, weights_only=True)["state_dict"].items()}
    bad = _edited(path, tmp_path, "shapes.ckpt", lambda d: d["state_dict"].update(
        {name: torch.zeros(7) for name in names[:2]}))
    with pytest.raises(InvalidCheckpoint, match=rf"\({names[0]} has shape \[7\], the policy needs "
                                                rf"\[{', '.join(map(str, shapes[names[0]]))}\]\)$"):
        load_policy(bad)


def test_a_scalar_weight_saved_as_one_element_loads(saved, tmp_path):
    """torch loads a (1,) tensor into a 0-dim parameter (older checkpoints' log_alpha): no shape mismatch."""
    _, path = saved
    bad = _edited(path, tmp_path, "alpha1.ckpt", lambda d: d["state_dict"].__setitem__(
        "log_alpha", torch.tensor([0.25])))
    assert float(load_policy(bad)[0].log_alpha.detach()) == 0.25


def test_resumed_weights_of_another_dtype_are_refused_and_other_modules_weights_ignored(saved, tmp_path):
    policy, _ = saved
    weights = {f"policy.{k}": v.clone() for k, v in policy.state_dict().items()}
    ckpt.check_training_weights(tmp_path / "last.ckpt", {**weights, "value.weight": torch.zeros(1)}, policy.config,
                                "the config's policy")
    name = next(k for k, v in weights.items() if v.dim() == 2)
    shape = tuple(weights[name].shape)
    with pytest.raises(InvalidCheckpoint, match=rf"\({name} is \({shape[0]}, {shape[1]}\) torch.float64, expected "
                                                rf"\({shape[0]}, {shape[1]}\) torch.float32\); cannot resume"):
        ckpt.check_training_weights(tmp_path / "last.ckpt", {**weights, name: weights[name].double()},
                                    policy.config, "the config's policy")


def test_an_empty_zip_archive_is_named_as_one(tmp_path):
    """Its message was "0 entries such as 'none'", as though an entry were named none."""
    path = tmp_path / "empty.ckpt"
    zipfile.ZipFile(path, "w").close()
    with pytest.raises(InvalidCheckpoint, match=r"empty.ckpt: a zip archive, not a torch checkpoint \(it holds no "
                                                r"data.pkl; no entries at all\)$"):
        read_checkpoint(path)


def test_saving_over_a_folder_says_it_is_a_folder(tmp_path):
    """It said "not a regular file (a device, pipe or socket)" of a folder; the folder and what it holds stay."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "kept.txt").write_text("kept")
    with pytest.raises(IsADirectoryError, match=r"Is a directory: '.*run'"):
        ckpt.atomic_torch_save({"x": torch.zeros(1)}, tmp_path / "run")
    assert (tmp_path / "run" / "kept.txt").read_text() == "kept"
