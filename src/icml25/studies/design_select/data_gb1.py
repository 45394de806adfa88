"""GB1 (Wu et al. 2016; all 20^4 variants at sites V39/D40/G41/V54, the paper's Fig. 3 landscape),
as shipped by the official repository (gb1-models/gb1-data.csv: Variants, log_fitness,
estimated_variance). Full scale only: fetched, parsed into a lookup table (the GB1 oracle), and the
tasks gb1_known (our predictor and max-entropy menu) and gb1_official (the paper's released 5k predictor
and 101 design distributions) built from it."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from icml25.core.errors import UserError

AA = "lsrvaptg*iyfchqnkdewm"  # the official gb1.py amino-acid order (with stop)
AA_NOSTOP = AA.replace("*", "")
WT = "vdgv"
FILE = "gb1-data.csv"


def git_blob_sha1(path: Path) -> str:
    """Git's object id of a file: sha1(b"blob <size>\\0" + content)."""
    import hashlib

    path = Path(path)
    h = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def download(gcfg: dict, raw_dir: Path) -> None:
    """Fetch gb1-data.csv. No sha256 is published; the official repository's git tree pins the file's
    git blob id (sha1 over "blob <size>\\0" + content), checked here when configured."""
    from icml25.core.download import fetch

    dest = fetch(gcfg["url"], Path(raw_dir) / FILE, gcfg.get("sha256"))
    want = gcfg.get("git_blob_sha1")
    if want and (got := git_blob_sha1(dest)) != want:
        dest.unlink()
        raise UserError(f"{gcfg['url']}: git blob id {got} != {want} (the official repository's gb1-data.csv); "
                        f"the download was deleted")


def read_table(path: Path) -> dict:
    import pandas as pd

    df = pd.read_csv(path)
    missing = {"Variants", "log_fitness"} - set(df.columns)
    if missing:
        raise UserError(f"{path}: missing column(s) {sorted(missing)}; expected the official gb1-data.csv")
    seqs = df["Variants"].str.lower().tolist()
    if any(len(s) != 4 for s in seqs):
        raise UserError(f"{path}: variants must be 4 amino acids")
    lut = {c: i for i, c in enumerate(AA_NOSTOP)}
    try:
        idx = np.array([[lut[c] for c in s] for s in seqs], np.int64)
    except KeyError as exc:
        raise UserError(f"{path}: unknown amino acid {exc}") from None
    var = df["estimated_variance"].to_numpy(float) if "estimated_variance" in df else np.full(len(df), np.nan)
    return {"idx": idx, "y": df["log_fitness"].to_numpy(float), "var": var}


def preprocess(gcfg: dict, raw_dir: Path, out_dir: Path) -> None:
    t = read_table(Path(raw_dir) / FILE)
    if gcfg.get("require_complete", True) and len(t["y"]) != 20 ** 4:
        raise UserError(f"GB1 table has {len(t['y'])} rows, expected all 20^4 = 160000 variants")
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    np.savez(Path(out_dir) / "gb1.npz", **t)


class GB1Oracle:
    """Lookup-table oracle: label of a variant = its (imputed) log fitness."""

    def __init__(self, idx: np.ndarray, y: np.ndarray):
        self.table = np.full(20 ** 4, np.nan)
        self.table[idx @ (20 ** np.arange(3, -1, -1))] = y

    def __call__(self, idx: np.ndarray) -> np.ndarray:
        return self.table[np.asarray(idx) @ (20 ** np.arange(3, -1, -1))]


# ==== the GB1 known-density-ratio task (the paper's Fig. 3, official gb1.py) ============================
#
# Labelled library: NNK codons at the 4 sites (nucleotide site-wise categoricals; sequences with a stop
# codon rejected). Design distributions: nucleotide site-wise categoricals (12 sites x 4) solving
# max_q E_q f(x) + T H(q) by REINFORCE, one per temperature T. Both induce, after stop rejection, a
# product distribution over the 20 amino acids per site (the official get_nostop_loglikelihood sums
# the stop-free mass over all 20^4 sequences; for a product it factorises per site), so density
# ratios and true theta (sum over all 20^4 variants with the oracle's labels) are exact.

NUC = "atcg"  # the official NUCLEOTIDES order
AA2CODON = {
    "l": ["tta", "ttg", "ctt", "ctc", "cta", "ctg"], "s": ["tct", "tcc", "tca", "tcg", "agt", "agc"],
    "r": ["cgt", "cgc", "cga", "cgg", "aga", "agg"], "v": ["gtt", "gtc", "gta", "gtg"],
    "a": ["gct", "gcc", "gca", "gcg"], "p": ["cct", "ccc", "cca", "ccg"], "t": ["act", "acc", "aca", "acg"],
    "g": ["ggt", "ggc", "gga", "ggg"], "*": ["taa", "tag", "tga"], "i": ["att", "atc", "ata"],
    "y": ["tat", "tac"], "f": ["ttt", "ttc"], "c": ["tgt", "tgc"], "h": ["cat", "cac"], "q": ["caa", "cag"],
    "n": ["aat", "aac"], "k": ["aaa", "aag"], "d": ["gat", "gac"], "e": ["gaa", "gag"], "w": ["tgg"], "m": ["atg"],
}
CODON2AA = np.zeros(64, np.int64)  # codon index 16 n0 + 4 n1 + n2 -> index in AA (with stop)
for _aa, _cods in AA2CODON.items():
    for _c in _cods:
        CODON2AA[16 * NUC.index(_c[0]) + 4 * NUC.index(_c[1]) + NUC.index(_c[2])] = AA.index(_aa)
NOSTOP2AA = np.array([AA.index(c) for c in AA_NOSTOP])
STOP = AA.index("*")
N_SITES = 4
PNUC_NNK = np.tile(np.array([[0.25] * 4, [0.25] * 4, [0.0, 0.5, 0.0, 0.5]]), (N_SITES, 1))  # N N K(=G/T)
TASK_DIR = "gb1"
GB1_TASKS = ("gb1_known", "gb1_official")
OFFICIAL_DIR = "official"
OFFICIAL_COMMIT = "f06a7b95d3a54eb1e058e9b9023dcb59a9eca36d"
OFFICIAL_BASE_URL = f"https://raw.githubusercontent.com/clarafy/design-algorithm-selection/{OFFICIAL_COMMIT}/gb1-models"
OFFICIAL_MODEL = "gb1-5k-model.pt"
OFFICIAL_SHA256 = {  # sha256 of the official repository's files at OFFICIAL_COMMIT (computed from its git tree)
    "5k-t0.2000.npz": "d7049c10d32682d0e4917e5fc7b0b9a965be8e72e2279fd10f2ef3ef6375b45f",
    "5k-t0.2050.npz": "931b6f48da397304a02fdefb439d19bf5b28edc2e4bce123b4a241c5c6ee51c0",
    "5k-t0.2100.npz": "08615fda03ec1b5f93edac89cf275d6a89119fe416060408248058f1e31d3b8c",
    "5k-t0.2150.npz": "685a63848748d82c21f2483ddfd4c81fe1c0dea5d7d3df142986fbdc476fa905",
    "5k-t0.2200.npz": "e8a6302377bbbb798ef40a485dd85bdbe67ccc4bf76be46ebbcdf10ff2a8e093",
    "5k-t0.2250.npz": "95adaf254b5ef941e1ad5f1b86c7658f74318b777aa9d2be404c300fc7602dc0",
    "5k-t0.2300.npz": "34b600c9daec257dcda8967312d93445d6af41c6f1aa1482fe661203a5f1d50d",
    "5k-t0.2350.npz": "df180ab43af6337bc02ea07ac44f59d7943ea5a2181583530b7e84fcbab28608",
    "5k-t0.2400.npz": "a89051ca524224a0909c4b853f36dd9acdd75ee373a133173fe0a43ef7b4919d",
    "5k-t0.2450.npz": "db144d6eeabafe927b4e197ceb0114e4e84e14743f8d965bed895953b9278da2",
    "5k-t0.2500.npz": "730d206fb7b78f8cc38178069a25e69ae1bbef889375d7903d8a8bb2a79a9aed",
    "5k-t0.2550.npz": "ba302dda681ccca360d52f18396be1d2ebade86642f4b91645e52d8444dd0cb8",
    "5k-t0.2600.npz": "6efc4e93a70a57ee047c845db0856fc658ca4c64becaea0d12d34bc88c903a82",
    "5k-t0.2650.npz": "1b88fb20d4d9ec1651aeff17ab8293e996d879373a136f08b32973008af8f6a1",
    "5k-t0.2700.npz": "d3d42e135b10e1153df000e9f11a21bd8a005faaea7ba95de5f904290b707607",
    "5k-t0.2750.npz": "f25afd462ae993ad55504a76736d4b0a8c98c742bf3b000e32368c4d06024261",
    "5k-t0.2800.npz": "de58b222fc0f13ef2d366ae4555919571e7389a706be890ac766a2b795dc97fc",
    "5k-t0.2850.npz": "6831b984b6889b9a6f109acfb7c29ef0bdfeff728bc73bddf8275bf050ec85fc",
    "5k-t0.2900.npz": "60f7afbd1a8a525add7df774105f95ababb259bbd9eb4336170d97a9c0401b16",
    "5k-t0.2950.npz": "de551d38d54f82459506dfa462c4741962d1f2f32b7c16a6fb18c14b909edc80",
    "5k-t0.3000.npz": "ec8f8af0154562a2e7d8d93f6325a6617ec6015e7e6c81586ce0f50ddb88fb59",
    "5k-t0.3050.npz": "a832789c5220faec3aead6b08950be8b38caa39a7fc86dd7e5bac52d1c321941",
    "5k-t0.3100.npz": "5785f22b2ecdef8f83759cd757746dbcb29084efaf9091ac63d5003d963152f7",
    "5k-t0.3150.npz": "c9a83543824870f2289682579dbe489214362c26e197fa16b1426d8def338a8f",
    "5k-t0.3200.npz": "a499c6ea951c0eb6abeaac75130981c001e8cbd877e3089b0432873e18189d2e",
    "5k-t0.3250.npz": "7cfef75fc45ef9bd389f231a9c4f053a5f169bc255336d40aea759819e91121b",
    "5k-t0.3300.npz": "9463bca4e244c9bf61c5083a1d18431b89b06bf5deb365562e905ed994a4d3d8",
    "5k-t0.3350.npz": "c97083b551fc756c79b46c52e95f893d83052e5d85a894bfdc9ad34360aec714",
    "5k-t0.3400.npz": "263e6b42bde9c8a6feb7fa555b37d0c63486a313a9f163c6d385c8b01562b226",
    "5k-t0.3450.npz": "519d12726de5d03ca8b6e8e67bace230f5da5d69bcb3b4b8ec38f8bd27be50b0",
    "5k-t0.3500.npz": "bd38e076b87136786b8d2a14ea8d97eadc5bed7b7296225d70352f8f38cf7227",
    "5k-t0.3550.npz": "f79cc628335cf0c045a00e0f59c57c895d2f4b66ec39312604c8ae9c08552975",
    "5k-t0.3600.npz": "44935038a3a50dcbfa6a6183ca8b49649eadf39c8e6de0e34039b5791fe0ee05",
    "5k-t0.3650.npz": "a3c2ec699b0ee56476faf96ffd93bc2912ff76d3c1bee882d5bd8d53aeadb871",
    "5k-t0.3700.npz": "e2d82be026714842a263f1d8ad0561a918f2d445c65bf026d0e91aa4cc2f53dd",
    "5k-t0.3750.npz": "8482fca23aa06b7f90e19cb4dc8a16839a077dc7038e7652447dda70f49cab30",
    "5k-t0.3800.npz": "d1a42ef40b6af6733ce9957b354271bf711631f0a8d9b6264db452411887dd18",
    "5k-t0.3850.npz": "1bfc262b0a041326d9a5741301e1e40108a3d66d34a23f6f09345ce716f0c079",
    "5k-t0.3900.npz": "0605f1539710dd92152d1418001524f11d1f2667422cb826192785a08fd65cf4",
    "5k-t0.3950.npz": "e8e2cf70ffca8ba4990db2fd8f86b6f6b6947cbf5975774fa878f999eff11b6a",
    "5k-t0.4000.npz": "6f595f7f4d62f5fc58145e0f19cc26817fbd1e1fcdf988a3bd7152dd5eb88b5b",
    "5k-t0.4050.npz": "e2b1dc49256e8e2b717062a20d16c0485f5081651a8fd5058922d62b6bbaa1e6",
    "5k-t0.4100.npz": "77801efa0283453fa41b409b1dd79269afa7540cb660580fe742ea86b3eca758",
    "5k-t0.4150.npz": "12a67897a2ba42f432747141b4ad12b9eeecf9a8dcd232099b486f62d693628a",
    "5k-t0.4200.npz": "2df9b925f4f89dea75e6a090ae013aab123a5f851b87d882c0012bc35101ae96",
    "5k-t0.4250.npz": "2a63a43234e84204a12c1ac30d3b118769a3317dd92cf2b1afedb8f3882d22a8",
    "5k-t0.4300.npz": "122a7e6fb593566a9805dd418c765f98b825ad5ad62de871d6a9b030b9ce289b",
    "5k-t0.4350.npz": "411c4b6df02cecda792793617a0310a21802a6f1da15e09b65c347c9ff94edd8",
    "5k-t0.4400.npz": "fb642502a8c983c84830ae5550b0b61102a35f4423d8d42c8b220126bb2c57f6",
    "5k-t0.4450.npz": "74b348cc9e17747ddb0beb72c0e7d2c48428a43b81011e865bbd13a6b111b325",
    "5k-t0.4500.npz": "adc2919cdccfa04c5a054a7f3ee77d9f405cead43e43d16e08bac8d9df542f9e",
    "5k-t0.4550.npz": "3efb657f66882a6a498bf44e4cc8ef5c236bf599d330a7a6b5fdf7413683727d",
    "5k-t0.4600.npz": "1bf964c3d67a0d4ae421fa1c964e0864e4577f7502cc3f0a1b04b8de5885a360",
    "5k-t0.4650.npz": "cbdd7322ab6012778842023130062c15bdcb7d2549e7ae56ad5888b9e3f0824d",
    "5k-t0.4700.npz": "e3bed5a5d05f928df8c8bf8d98647c0700a7996008b48728b24d478734969284",
    "5k-t0.4750.npz": "f5217f72450096478c3ac491b58bcc0d4db488fb2c767733610430bf74dfa16c",
    "5k-t0.4800.npz": "6615a64bb871adca17015c4c4e1b408f13870c1e5779c5c60390d1f53fae116e",
    "5k-t0.4850.npz": "6d67f011ffa57cf2c373a7f520a07674b071990630324a03b7be6cf6dbaa9ee1",
    "5k-t0.4900.npz": "3ed13e733e9ab1388fa1b751e4dfd53fd28484c89daab3065a20fb3861ac860f",
    "5k-t0.4950.npz": "36e49e2aa7c3c2a5e0eda88794f479da1ecccfab43c07e8f9a92c51e2de7663d",
    "5k-t0.5000.npz": "c9d83fb2a0b6484f3f210b23170dc41db4585776804ea88e6925cfe9e98f9f24",
    "5k-t0.5050.npz": "75bb320fb54950d37a4772acc316973bf3d5618eed867960e47dde81c74a996d",
    "5k-t0.5100.npz": "335a67f028af81289baff3023fc91239dbc57be53d13cab8d6f137485aaae741",
    "5k-t0.5150.npz": "dd9bedcc12c16611a2c14b0b69c0e314badf3df9d930656603959fa0e8d41d15",
    "5k-t0.5200.npz": "21b1381c630b1ac3bd1f19b3a05502581bb9a83a25980a004c22e3a211a6ddce",
    "5k-t0.5250.npz": "73b0873f4cfa7ded6a54bb06979f5d4403a2fdd859306e6ea7d73af106abb7e1",
    "5k-t0.5300.npz": "8e344308ac54532335232a8ede24a2394d2a2b9149c374ae642d9370d1d86db7",
    "5k-t0.5350.npz": "64942793f80e93497d495577a0839f42310966e3017c1534ec1cd12b4bc9f3ec",
    "5k-t0.5400.npz": "560d818cc9d13e3052769091684a58406d37fb16b0224ceafd3c4cdfa5a610a3",
    "5k-t0.5450.npz": "42412cfb0eb4ce9bd7194b58c08e649e3b3270d9f2d5f84a6fd5ce219edfba93",
    "5k-t0.5500.npz": "5bc43eb9fb51df5c65665dcff1afad3343ea5a2455b081ed472c8c512f344ed7",
    "5k-t0.5550.npz": "13da090405629f326083733950168e144b24cfb022a99d40a6cf98c482ca1578",
    "5k-t0.5600.npz": "c5baf7cf247b2d716ed5306a69ef1461880c059fd64c94d1b8354df8df2a936b",
    "5k-t0.5650.npz": "950221e1f66d27a6ae8b5ac1962aa1947466ee8d1d71e57deb8a5186ed1512e0",
    "5k-t0.5700.npz": "9964ab6ed09ccaacd0ab85e1a05e2fda5003cbfd4b9c3504fe86c8ba901f6825",
    "5k-t0.5750.npz": "5191f6c5bb8fed65c2341ae2b6a3ddb8b284894c3f50710f2335091f369141b2",
    "5k-t0.5800.npz": "3071459f82571f4ecf6ca03f08ac7dad173df0e2eb471c78a8730cd300ab407b",
    "5k-t0.5850.npz": "a385533e6ecf786d27ec0280ca8d675bdc8796bf6c59b29f81ab1e9d4d3ecab7",
    "5k-t0.5900.npz": "4fea08a88b876eb99bf89bb327a96efa207350c6f42d0ac68a1f7f8e70d63f76",
    "5k-t0.5950.npz": "c64ea3e2e42340d0ce1b4cdbfc7161a0be18a72ca9f44879014839c086371637",
    "5k-t0.6000.npz": "40992ff3e422918a50c38c9e877c8b001bdf223e4c35bad400e46d93a959f326",
    "5k-t0.6050.npz": "fc624f5300890a93d265ee241a61e5056098d7b8c3a97c38e17ec27ca3406b26",
    "5k-t0.6100.npz": "2e5d3a350af13b3cdcd8bdf9671a603d621bd45a095c74922203ea9e1c42898e",
    "5k-t0.6150.npz": "9aa8f5c25e4626e7169c90cfa287d26cde7dcbe412c4894baf6cde469ad19c54",
    "5k-t0.6200.npz": "224d33fb4921d41db8bed500ea21d01a61aab03ea0f29d52b568353433912bac",
    "5k-t0.6250.npz": "f5bd0281cff88ae0dd7de27e422653c8168b437e08ec11a17c02063ff4c57570",
    "5k-t0.6300.npz": "1a3fd7ac5471ace5c8537d963b440c497e201cda53e25902a140a71cca28f322",
    "5k-t0.6350.npz": "7313633cade6dc2c8f9ab8491bff8506c9812b07e9a9357effe408166a669f42",
    "5k-t0.6400.npz": "5675faa73323ba3157d3a0b86785fcaac58a4e7d911c301b8a09c024fb48b2ed",
    "5k-t0.6450.npz": "23fde8adabd1632486317d947e5e3c458e779f211bbd4e6692e49463d4601b0d",
    "5k-t0.6500.npz": "9d3c41a810b72e455ab2067aefd1c7d894c0463d7e1296aa25bae4316cefb1ae",
    "5k-t0.6550.npz": "3c40c51747cf3916779120821a9126404568ac197a2121345ad8c2ed538a93f3",
    "5k-t0.6600.npz": "ac49225fa2288704edbd5025ffe5214f79855882295a6ee7cd3c9f8c2b3d62ef",
    "5k-t0.6650.npz": "552991f72934b88292e4517549bab6d4c0c9e13b32549f75c8a8cbdb07412519",
    "5k-t0.6700.npz": "69b645324f84848af8acc838aabfa0247971a52c0a4241f8f7bc038b9423667c",
    "5k-t0.6750.npz": "4cacba5c6632ec695a12d0f214629d4c5bd11735d727671d433737d6f21f6f46",
    "5k-t0.6800.npz": "1e3de5a2ac6bc0368f524ba9bf1fb8ca3421b78d41754b136c8f3e845ea16b71",
    "5k-t0.6850.npz": "982170f48b3796efb91c9088ac4fa156331950923929fcc985bfa3b9d8ffca81",
    "5k-t0.6900.npz": "341a95789c7a42b35fc3e99a5a1fe0dd9ee494f8e3d1196b277901cfc7ec2935",
    "5k-t0.6950.npz": "1fa5c12dabf489eeb27044137ef6943174ae32ecbedd7cf4413f54f22ede9346",
    "5k-t0.7000.npz": "0feec8e7662d64211c9c980d1f8177bd57c2777df579dd61b3eea46fe0f39653",
    "gb1-5k-model.pt": "238d37a5c13ea6fbb7e1a2b1966ed3efdb2926b8ad55a1637ff3ae998b4ed60f",
}


def task_dir(task: str) -> str:
    """gb1_known: our predictor and our max-entropy menu; gb1_official: the paper's released 5k
    predictor and its 101 released design distributions (gb1-models/5k-t*.npz)."""
    return TASK_DIR if task == "gb1_known" else "gb1_official"


def official_menu_file(T: float) -> str:
    return f"5k-t{T:.4f}.npz"


def download_official(gcfg: dict, raw_dir: Path) -> None:
    """The paper's released 5k predictor and its design distributions for our temperature grid,
    sha256-verified (OFFICIAL_SHA256)."""
    from icml25.core.download import fetch

    base = gcfg.get("official_base_url") or OFFICIAL_BASE_URL
    for name in [OFFICIAL_MODEL] + [official_menu_file(T) for T in temperatures(gcfg)]:
        if name not in OFFICIAL_SHA256:
            raise UserError(f"no released GB1 file {name}: the official menu has T = 0.2, 0.205, ..., 0.7")
        fetch(f"{base}/{name}", Path(raw_dir) / OFFICIAL_DIR / name, OFFICIAL_SHA256[name])


def load_official_model(path: Path):
    """The official EnrichmentFeedForward state dict (3 x Linear(84,10)-ReLU-Linear(10,10)-ReLU-Linear(10,1)
    on the 21-letter one-hot) as our MLPEnsemble (same architecture, ensemble mean / member std)."""
    import torch

    from . import data_models as M

    sd = torch.load(path, map_location="cpu", weights_only=True)
    n = 1 + max(int(k.split(".")[1]) for k in sd)
    return M.MLPEnsemble([[(sd[f"models.{i}.{j}.weight"].double().numpy().T.copy(), sd[f"models.{i}.{j}.bias"].double().numpy())
                           for j in (0, 2, 4)] for i in range(n)])


def aa_probs(pnuc: np.ndarray) -> np.ndarray:
    """(3 L, 4) nucleotide site-wise probabilities -> (L, 21) amino-acid probabilities (AA order, with
    stop): the official get_aa_probs_from_nuc_probs."""
    L = pnuc.shape[0] // 3
    out = np.zeros((L, len(AA)))
    for l in range(L):
        p = pnuc[3 * l:3 * l + 3]
        pc = (p[0][:, None, None] * p[1][None, :, None] * p[2][None, None, :]).reshape(64)
        np.add.at(out[l], CODON2AA, pc)
    return out


def nostop_product(pnuc: np.ndarray) -> np.ndarray:
    """The stop-rejected amino-acid distribution as site-wise categoricals (L, 20) in AA_NOSTOP order."""
    paa = aa_probs(pnuc)[:, NOSTOP2AA]
    return paa / paa.sum(1, keepdims=True)


def translate(nuc_idx: np.ndarray) -> np.ndarray:
    """(n, 3 L) nucleotide indices -> (n, L) amino-acid indices in AA (with stop)."""
    n, m = nuc_idx.shape
    c = nuc_idx.reshape(n, m // 3, 3)
    return CODON2AA[16 * c[..., 0] + 4 * c[..., 1] + c[..., 2]]


def sample_nuc_reject(pnuc: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """The official sampler: nucleotides site-wise, translate, reject any sequence with a stop codon.
    Returns (n, L) indices in AA_NOSTOP order. (Used to check nostop_product, not in the pipeline.)"""
    from . import data_landscape as Lnd

    aa_to_nostop = np.full(len(AA), -1)
    aa_to_nostop[NOSTOP2AA] = np.arange(len(AA_NOSTOP))
    out = []
    while sum(len(o) for o in out) < n:
        a = translate(Lnd.sample_product(pnuc, 2 * n, rng))
        out.append(aa_to_nostop[a[(a != STOP).all(1)]])
    return np.concatenate(out)[:n]


def onehot21(idx20: np.ndarray) -> np.ndarray:
    """(n, 4) AA_NOSTOP indices -> (n, 84) one-hot over the official 21-letter alphabet (with stop)."""
    from . import data_landscape as Lnd

    return Lnd.onehot(NOSTOP2AA[np.asarray(idx20)], len(AA))


def exact_theta(Q: np.ndarray, table4: np.ndarray) -> float:
    """sum over all 20^4 variants of prod_l Q[l, x_l] * table4[x] (the official
    get_true_mean_label_from_theta)."""
    return float(np.einsum("i,j,k,l,ijkl->", Q[0], Q[1], Q[2], Q[3], table4))


def temperatures(gcfg: dict) -> np.ndarray:
    lo, hi, k = gcfg["temperature_grid"]
    return np.linspace(lo, hi, int(k))  # official: np.arange(0.2, 0.701, 0.005), 101 values


def _fit_predictor(kind, X1, y, var, gcfg, seed, rng):
    from . import data_models as M

    if kind == "ridge":
        return M.Ridge.fit(X1, y, rng)
    mc = gcfg["mlp"]
    w = None
    if gcfg.get("weighted_loss", True) and np.all(np.isfinite(var)) and np.all(var > 0):
        w = (1.0 / (2.0 * var)).astype(np.float32)  # official EnrichmentFeedForward: weight 1 / (2 var)
    return M.MLPEnsemble.fit(X1, y.astype(np.float32), seed=seed, n_models=mc["n_models"], n_hidden=mc["n_hidden"],
                             n_epoch=mc["n_epoch"], batch_size=mc.get("batch_size", 256), lr=mc.get("lr", 2e-3),
                             weights=w)


def build_task(cfg: dict, out_dir: Path, task: str = "gb1_known", raw_dir: Path | None = None) -> None:
    """Predictors, the temperature menu with exact true theta, per-seed trial sets and the tau grid
    of a GB1 task, written to out_dir/<task_dir(task)>/ (the table gb1.npz is in out_dir/gb1/)."""
    import time

    from icml25.core.io import write_json

    from . import data_designers as D
    from . import data_landscape as Lnd

    g = cfg["data"]["gb1"]
    official = task == "gb1_official"
    d = Path(out_dir) / task_dir(task)
    d.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    tab = dict(np.load(Path(out_dir) / TASK_DIR / "gb1.npz"))
    oracle = GB1Oracle(tab["idx"], tab["y"])
    if np.isnan(oracle.table).any():
        raise UserError("GB1 table misses variants: the task needs a label for all 20^4 sequences")
    var = np.full(20 ** 4, np.nan)
    var[tab["idx"] @ (20 ** np.arange(3, -1, -1))] = tab["var"]
    table4 = oracle.table.reshape(20, 20, 20, 20)
    gamma = float(g.get("gamma", 0.0))
    rng = np.random.default_rng([cfg["data"]["data_seed"], 61 + official])
    P = nostop_product(PNUC_NNK)
    predictors = ["mlp"] if official else list(g["predictors"])

    # predictors trained on NNK-library sequences labelled by the oracle (the paper's 5k model)
    Xtr = Lnd.sample_product(P, g["n_train"], rng)
    ytr, vtr = oracle(Xtr), var[Xtr @ (20 ** np.arange(3, -1, -1))]
    X1 = onehot21(Xtr)
    if official:  # the paper's released model (trained on its own 5k NNK sample)
        models = {"mlp": load_official_model(Path(raw_dir) / OFFICIAL_DIR / OFFICIAL_MODEL)}
    else:
        models = {p: _fit_predictor(p, X1, ytr, vtr, g, cfg["data"]["data_seed"], rng) for p in predictors}
    np.savez(d / "models.npz", **{f"{p}__{k}": v for p, m in models.items() for k, v in m.state().items()})
    print(f"[design_select] gb1 predictors fitted ({time.time() - t0:.0f}s)", flush=True)

    # the menu: one nucleotide max-entropy distribution per (predictor, temperature)
    rc = g["reinforce"]
    Qnuc, Q, pred, temps, names = [], [], [], [], []
    for pi, p in enumerate(predictors):
        f = models[p].predict

        def predict_nuc(Xnuc1, f=f):  # (n, 48) nucleotide one-hot -> AA with stop codons -> f
            aa = translate(Xnuc1.reshape(len(Xnuc1), 3 * N_SITES, 4).argmax(-1))
            return f(Lnd.onehot(aa, len(AA)))

        for T in temperatures(g):
            if official:  # the released theta_lxa: nucleotide logits (official normalize_theta = softmax)
                qn = Lnd.softmax_rows(np.load(Path(raw_dir) / OFFICIAL_DIR / official_menu_file(T))["theta_lxa"])
            else:
                init = rng.standard_normal((3 * N_SITES, 4))  # official initialization='rand'
                qn = D.reinforce_maxent(predict_nuc, 3 * N_SITES, 4, float(T), rng, n_iter=rc["iters"],
                                        n_sample=rc["samples"], lr=rc["lr"], init_logits=init)
            Qnuc.append(qn); Q.append(nostop_product(qn)); pred.append(pi); temps.append(float(T))
            names.append(f"maxent-{p}-T{T:.4f}")
    Q = np.stack(Q)
    th_mean = np.array([exact_theta(q, table4) for q in Q])
    th_exc = np.array([exact_theta(q, (table4 >= gamma).astype(float)) for q in Q])
    np.savez(d / "known.npz", Qnuc=np.stack(Qnuc), Q=Q, predictor=np.array(pred), temperature=np.array(temps),
             theta_mean=th_mean, theta_exceed=th_exc)
    print(f"[design_select] {task} menu: {len(Q)} configurations, theta in [{th_mean.min():.3f}, {th_mean.max():.3f}] "
          f"({time.time() - t0:.0f}s)", flush=True)

    # trial sets: fresh NNK labelled data per trial, labels from the oracle (never reused across trials)
    for s in range(g["n_trial_sets"]):
        r = np.random.default_rng([cfg["data"]["data_seed"], 3000 + s])
        X = Lnd.sample_product(P, g["n_trials"] * g["n_labelled"], r)
        np.savez(d / f"trials_{s}.npz", X=X.reshape(g["n_trials"], g["n_labelled"], N_SITES).astype(np.int8),
                 Y=oracle(X).reshape(g["n_trials"], g["n_labelled"]))

    taus = {}
    for gname, th in (("mean", th_mean), ("exceed", th_exc)):
        if gname == "mean" and g.get("taus"):
            lo, hi, step = g["taus"]  # the paper's np.arange(0.0, 1.51, 0.05)
            grid = np.arange(lo, hi + step / 10, step)
        else:  # over the menu's range of true theta, as the RNA tasks
            lo_f, hi_f = cfg["data"]["tau_span"]
            grid = th.min() + (th.max() - th.min()) * np.linspace(lo_f, hi_f, g.get("n_tau", cfg["data"]["n_tau"]))
            grid = np.minimum(grid, 1.0) if gname == "exceed" else grid
        taus[gname] = [float(t) for t in grid]
    write_json(d / "meta.json", {"P": P.tolist(), "gamma": gamma, "names": names, "taus": taus,
                                 "predictors": predictors, "seconds": time.time() - t0,
                                 "train_label_mean": float(ytr.mean())})


def load_task(data_dir: Path, task: str = "gb1_known") -> dict:
    import json

    from . import data_models as M

    d = Path(data_dir) / task_dir(task)
    meta = json.loads((d / "meta.json").read_text())
    mz = np.load(d / "models.npz")
    cls = {"ridge": M.Ridge, "mlp": M.MLPEnsemble}
    models = {p: cls[p].from_state({k.split("__", 1)[1]: mz[k] for k in mz.files if k.startswith(p + "__")})
              for p in meta["predictors"]}
    return {"meta": meta, "models": models, "known": dict(np.load(d / "known.npz")), "P": np.array(meta["P"])}


def load_trials(data_dir: Path, seed: int, task: str = "gb1_known") -> dict:
    z = np.load(Path(data_dir) / task_dir(task) / f"trials_{seed}.npz")
    return {"X": z["X"].astype(np.int64), "Y": z["Y"]}
