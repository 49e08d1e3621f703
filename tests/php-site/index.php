<?php
// A tiny legacy-style site for crawlgate's end-to-end test, served by
// `php -S 127.0.0.1:PORT tests/php-site/index.php`.
//
// `?do=vote` appends a line to the file named by $VOTES_FILE: exactly the
// kind of action link a robot must not be able to click. The vote counts if
// PHP's own $_GET or a Nette-3-style parse of the query says `do` = `vote`,
// because an application may read its parameters either way.

$file = getenv('VOTES_FILE');
$crawler = $_SERVER['HTTP_X_CRAWLER'] ?? '-';

// Nette 3 parses the raw query itself (Nette\Http\Url::parseQuery): every
// name is wrapped as an index of `0` before parse_str, which keeps dots and
// spaces and ends a name at `]`.
function framework_query(string $query): array
{
    $query = str_ireplace('%5B', '[', $query);
    $query = preg_replace('#&([^[&=]+)([^&]*)#', '&0[$1]$2', '&' . $query);
    parse_str($query, $parsed);
    return is_array($parsed[0] ?? null) ? $parsed[0] : [];
}

$framework = framework_query($_SERVER['QUERY_STRING'] ?? '');
$via = [];
if (($_GET['do'] ?? null) === 'vote') {
    $via[] = 'get';
}
if (($framework['do'] ?? null) === 'vote') {
    $via[] = 'framework';
}
if ($via && $file) {
    file_put_contents($file, 'vote via=' . implode('+', $via) . " crawler=$crawler\n", FILE_APPEND | LOCK_EX);
}

header('Content-Type: text/plain; charset=utf-8');
echo "php site: {$_SERVER['REQUEST_METHOD']} {$_SERVER['REQUEST_URI']}\n";
echo "X-Crawler: $crawler\n";
echo 'voted: ' . ($via ? implode('+', $via) : 'no') . "\n";
