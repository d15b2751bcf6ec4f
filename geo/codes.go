package geo

// numCodes is the number of two-letter codes, AA to ZZ.
const numCodes = 26 * 26

// codeIndex returns the index in [0, numCodes) of the two-letter code made of
// a and b, in either case, or -1 if they are not both ASCII letters.
func codeIndex(a, b byte) int {
	a, b = a&^0x20, b&^0x20 // upper case; other bytes fail the range test below
	if a < 'A' || a > 'Z' || b < 'A' || b > 'Z' {
		return -1
	}
	return int(a-'A')*26 + int(b-'A')
}

// stringIndex is codeIndex for a string, -1 unless it has two bytes.
func stringIndex(s string) int {
	if len(s) != 2 {
		return -1
	}
	return codeIndex(s[0], s[1])
}

// codeStrings holds every two-letter code, AA to ZZ, in upper case, as
// substrings of one string: Country returns these, so a lookup never
// allocates a string.
var codeStrings = func() (t [numCodes]string) {
	b := make([]byte, 0, 2*numCodes)
	for a := byte('A'); a <= 'Z'; a++ {
		for c := byte('A'); c <= 'Z'; c++ {
			b = append(b, a, c)
		}
	}
	all := string(b)
	for i := range t {
		t[i] = all[2*i : 2*i+2]
	}
	return t
}()

// assignedCodes lists the 249 officially assigned ISO 3166-1 alpha-2 codes,
// plus XK (Kosovo), a user-assigned code that MaxMind, DB-IP and the
// European Commission use, so that a rule can name it.
const assignedCodes = "" +
	"AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ " +
	"BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW BY BZ " +
	"CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ " +
	"DE DJ DK DM DO DZ " +
	"EC EE EG EH ER ES ET " +
	"FI FJ FK FM FO FR " +
	"GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY " +
	"HK HM HN HR HT HU " +
	"ID IE IL IM IN IO IQ IR IS IT " +
	"JE JM JO JP " +
	"KE KG KH KI KM KN KP KR KW KY KZ " +
	"LA LB LC LI LK LR LS LT LU LV LY " +
	"MA MC MD ME MF MG MH MK ML MM MN MO MP MQ MR MS MT MU MV MW MX MY MZ " +
	"NA NC NE NF NG NI NL NO NP NR NU NZ " +
	"OM " +
	"PA PE PF PG PH PK PL PM PN PR PS PT PW PY " +
	"QA " +
	"RE RO RS RU RW " +
	"SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ " +
	"TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ " +
	"UA UG UM US UY UZ " +
	"VA VC VE VG VI VN VU " +
	"WF WS " +
	"XK " +
	"YE YT " +
	"ZA ZM ZW"

// assigned tells, by codeIndex, whether a code is in assignedCodes.
var assigned = func() (t [numCodes]bool) {
	for i := 0; i+1 < len(assignedCodes); i += 3 {
		t[codeIndex(assignedCodes[i], assignedCodes[i+1])] = true
	}
	return t
}()

// IsCountryCode reports whether code, in either case, is an officially
// assigned ISO 3166-1 alpha-2 country code, or XK (Kosovo).
func IsCountryCode(code string) bool {
	i := stringIndex(code)
	return i >= 0 && assigned[i]
}
