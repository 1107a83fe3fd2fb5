/* text/split_rules.c: the per-language data of the splitters. Adding a language is adding a
 * split_rules value below and listing it in `languages` (docs/splitting.md says how). Words
 * are written without their final '.'; several dots inside a word are kept ("z.B", "U.S").
 * Single letters ("z. B.", "J. R. R. Tolkien") never end a sentence in any language, so they
 * are not listed. */
#include <string.h>

#include "text.h"

static const char *const no_words[] = {NULL};

/* ---------------------------------------------------------------------------------------
 * German */

static const char *const de_codes[] = {"de", "deu", "ger", "gsw", NULL};

static const char *const de_abbreviations[] = {
    "Abb", "Abs", "Abt", "Adr", "allg", "Anh", "Anm", "Aufl", "Bd", "Bde", "Bearb", "bes", "Best",
    "betr", "Bez", "Bhf", "bspw", "bzgl", "bzw", "ca", "Chr", "dgl", "Dipl", "Dir", "Dr", "dt", "ebd",
    "ehem", "eigtl", "einschl", "engl", "entspr", "erg", "erw", "evtl", "exkl", "Fa", "ff", "Fr", "frz",
    "geb", "gegr", "gem", "Ges", "gesch", "ggf", "ggü", "Hbf", "Hg", "hl", "Hr", "Hrn", "Hrsg", "i.A",
    "i.d.R", "i.e", "Ing", "inkl", "insb", "Inh", "Jh", "Jhd", "Jhdt", "jmd", "jmdm", "jmdn", "jmds",
    "jun", "Kap", "kath", "Kfm", "kgl", "Kl", "Lfg", "lt", "Mag", "max", "Mio", "Mrd", "mind", "Mitgl",
    "mtl", "nachm", "näml", "Nchf", "o.Ä", "o.ä", "od", "österr", "Pfd", "Pkt", "Pl",
    "Prof", "Prov", "röm", "Rel", "resp", "sen", "Sp", "spez", "St", "Std", "Str", "stellv", "Tel",
    "Tsd", "u.a", "u.Ä", "u.ä", "u.U", "u.v.m", "usf", "urspr", "v.a", "v.Chr", "verh", "vgl", "vorm",
    "vs", "Wwe", "z.B", "z.T", "z.Z", "zzgl", "zz", "zzt", "zw", "d.h", "d.J", "d.M", "s.o", "s.u",
    "Mr", "Mrs", "Ms", "Dres", "Ziff", NULL,
};

/* numbered things and months, as in "Nr. 5", "Art. 3 GG", "S. 12", "5. Jan. 2020" */
static const char *const de_before_number[] = {
    "Nr", "Art", "Bsp", "Fig", "Gr", "Kap", "No", "S", "Tab", "Bd", "Hnr", "Jan", "Feb", "Mär", "Apr",
    "Jun", "Jul", "Aug", "Sep", "Sept", "Okt", "Nov", "Dez", NULL,
};

/* compounds: "Goethestr. 5", "Marienpl. 1" */
static const char *const de_number_endings[] = {"str", "pl", NULL};

static const char *const de_conjunctions[] = {
    "und", "aber", "oder", "denn", "sondern", "doch", "jedoch", "weil", "dass", "daß", "obwohl",
    "obgleich", "während", "wenn", "falls", "als", "damit", "sodass", "nachdem", "bevor", "ehe",
    "seit", "seitdem", "sobald", "solange", "bis", "ob", "indem", "wohingegen", "weshalb", "weswegen",
    "wodurch", "womit", "wobei", NULL,
};

static const split_rules german = {de_codes, de_abbreviations, de_before_number, de_number_endings, de_conjunctions, 1};

/* ---------------------------------------------------------------------------------------
 * English */

static const char *const en_codes[] = {"en", "eng", NULL};

/* Month names are listed only before a number ("Jan" is also a first name), weekday names
 * that are also words ("Sun", "Sat") not at all. "etc" is left out on purpose: it ends sentences as often as it sits inside them, and the
 * next word's case decides ("etc. The" splits, "etc. and" does not). */
static const char *const en_abbreviations[] = {
    "Mr", "Mrs", "Ms", "Mx", "Dr", "Prof", "Sr", "Jr", "St", "Rev", "Hon", "Gen", "Gov", "Sen", "Rep",
    "Capt", "Col", "Lt", "Sgt", "Maj", "Cmdr", "Adm", "Supt", "Messrs", "Mme", "Mlle", "Fr",
    "e.g", "i.e", "cf", "vs", "viz", "approx", "ca", "esp", "al", "Inc", "Ltd", "Corp", "Co",
    "Bros", "Dept", "Univ", "Assn", "Ave", "Blvd", "Rd", "Mt", "Ft", "U.S", "U.K", "U.N", "E.U",
    "U.S.A", "Ph.D", "M.D", "B.A", "M.A", "B.Sc", "M.Sc", "a.m", "p.m", "Tue", "Tues", "Wed", "Thu",
    "Thurs", "Vol", "vol", "eds", "Eq", "Eqs", "Fig", "Figs", "Nos", NULL,
};

static const char *const en_before_number[] = {
    "No", "no", "Nos", "Art", "art", "pp", "p", "Ch", "ch", "Sec", "sec", "Para", "para", "Op", "op",
    "Tab", "Ref", "ref", "Jan", "Feb", "Mar", "Apr", "Jun", "Jul", "Aug", "Sep", "Sept", "Oct",
    "Nov", "Dec", NULL,
};

static const char *const en_conjunctions[] = {
    "and", "but", "or", "nor", "yet", "so", "because", "although", "though", "while", "whereas",
    "which", "who", "whom", "whose", "where", "when", "whenever", "unless", "until", "since",
    "before", "after", "if", "that", NULL,
};

static const split_rules english = {en_codes, en_abbreviations, en_before_number, no_words, en_conjunctions, 0};

/* ---------------------------------------------------------------------------------------
 * every other language: titles written alike in many Latin-script languages */

static const char *const generic_abbreviations[] = {
    "Dr", "Prof", "Mr", "Mrs", "Ms", "St", "vs", "ca", "cf", "Ing", "Dipl", NULL,
};

static const char *const generic_before_number[] = {"No", "Nr", "Art", "pp", NULL};

static const split_rules generic = {no_words, generic_abbreviations, generic_before_number, no_words, no_words, 0};

static const split_rules *const languages[] = {&german, &english};
enum { N_LANGUAGES = sizeof languages / sizeof *languages };

/* ---------------------------------------------------------------------------------------
 * lookup */

static int in_list(const char *const *list, const char *word, size_t n) {
    for (; *list; list++)
        if (strncmp(*list, word, n) == 0 && (*list)[n] == 0) return 1;
    return 0;
}

int split_rules_for(const char *lang, const split_rules **sets) {
    int n = 0;
    if (!lang) {
        for (int i = 0; i < N_LANGUAGES && n < SPLIT_MAX_SETS - 1; i++) sets[n++] = languages[i];
    } else {
        /* the leading letters, lower case: "de_DE" and "deu_Latn" give "de" and "deu" */
        char code[4];
        size_t k = 0;
        while (k < 3 && ((lang[k] | 0x20) >= 'a' && (lang[k] | 0x20) <= 'z')) {
            code[k] = (char)(lang[k] | 0x20);
            k++;
        }
        code[k] = 0;
        for (int i = 0; k >= 2 && i < N_LANGUAGES; i++)
            if (in_list(languages[i]->codes, code, k)) {
                sets[n++] = languages[i];
                break;
            }
    }
    sets[n++] = &generic;
    return n;
}

/* Does word[0..n) end with an entry of list, with a letter (a byte >= 'A') before it? */
static int ends_with(const char *const *list, const char *word, size_t n) {
    for (; *list; list++) {
        size_t k = strlen(*list);
        if (k < n && (unsigned char)word[n - k - 1] >= 'A' && !memcmp(word + n - k, *list, k)) return 1;
    }
    return 0;
}

int split_rules_has(const split_rules *const *sets, int nsets, int which, const char *word, size_t n) {
    if (n == 0 || (n > 16 && which != 3) || n > 64) return 0;
    for (int i = 0; i < nsets; i++) {
        const split_rules *r = sets[i];
        if (which == 3 ? ends_with(r->number_endings, word, n)
                       : in_list(which == 0 ? r->abbreviations : which == 1 ? r->before_number : r->conjunctions,
                                 word, n))
            return 1;
    }
    return 0;
}

int split_rules_ordinals(const split_rules *const *sets, int nsets) {
    for (int i = 0; i < nsets; i++)
        if (sets[i]->ordinals) return 1;
    return 0;
}
